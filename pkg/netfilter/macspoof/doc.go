// Package macspoof installs, checks and removes the bridge plugin's MAC
// spoof filter: per attachment, a chain in the nftables bridge family that
// drops frames from the port whose source MAC is not the container's, in
// upstream's table and names, and collects the chains of gone attachments.
// Only the bridge plugin links it.
//
// It never filters anything but the frames entering from its own port.
package macspoof

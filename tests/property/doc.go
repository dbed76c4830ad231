// Package property holds issue 14's property test: for every plugin, with
// the configs where its features differ, ADD then DEL, and ADD then a GC
// that does not list the attachment, leave the stand-in host and the
// container as they were; a GC that lists the attachment keeps it whole.
// Chained plugins run behind their main plugin through libcni, and their own
// DEL and GC leave the main plugin's attachment as it was.
package property

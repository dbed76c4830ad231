package firewall

import (
	"errors"
	"fmt"
	"net"

	"github.com/godbus/dbus/v5"
)

// firewalld's D-Bus names.
const (
	fwdBusName   = "org.fedoraproject.FirewallD1"
	fwdPath      = "/org/fedoraproject/FirewallD1"
	fwdZoneIface = fwdBusName + ".zone"
)

// firewalld talks to firewalld on the system bus (DBUS_SYSTEM_BUS_ADDRESS,
// else the standard socket). Each container address is a source of the
// zone: firewalld's own rules then treat its traffic as the zone's.
type firewalld struct{ conn *dbus.Conn }

// openFirewalld connects to the system bus and reports whether firewalld
// answers there. It never asks D-Bus to start firewalld. The caller closes
// the connection (Close) when ok or err is nil.
func openFirewalld() (*firewalld, bool, error) {
	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		return nil, false, fmt.Errorf("system D-Bus: %w", err)
	}
	var has bool
	if err := conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, fwdBusName).Store(&has); err != nil {
		conn.Close()
		return nil, false, fmt.Errorf("system D-Bus: ask for %s: %w", fwdBusName, err)
	}
	return &firewalld{conn: conn}, has, nil
}

func (f *firewalld) Close() { f.conn.Close() }

func (f *firewalld) obj() dbus.BusObject { return f.conn.Object(fwdBusName, fwdPath) }

// zoneOf returns the zone holding source, "" for none.
func (f *firewalld) zoneOf(source string) (string, error) {
	var zone string
	if err := f.obj().Call(fwdZoneIface+".getZoneOfSource", 0, source).Store(&zone); err != nil {
		return "", fmt.Errorf("firewalld getZoneOfSource %s: %w", source, err)
	}
	return zone, nil
}

// addSources puts each of ips in zone and returns those it added (a
// source already in zone is not: it was there before, maybe a live
// attachment's, and an undo must leave it); on error, what it added is
// removed.
func (f *firewalld) addSources(zone string, ips []net.IP) (added []net.IP, err error) {
	defer func() {
		if err != nil {
			for _, ip := range added {
				_ = f.obj().Call(fwdZoneIface+".removeSource", 0, zone, ip.String()).Err // best effort: the error above is what ADD reports
			}
			added = nil
		}
	}()
	for _, ip := range ips {
		s := ip.String()
		have, err := f.zoneOf(s)
		if err != nil {
			return added, err
		}
		if have == zone {
			continue
		}
		if err := f.obj().Call(fwdZoneIface+".addSource", 0, zone, s).Err; err != nil {
			return added, fmt.Errorf("firewalld addSource %s to zone %q: %w", s, zone, err)
		}
		added = append(added, ip)
	}
	return added, nil
}

// removeSources takes each of ips out of zone; one that is not there is
// success.
func (f *firewalld) removeSources(zone string, ips []net.IP) error {
	var errs []error
	for _, ip := range ips {
		s := ip.String()
		have, err := f.zoneOf(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if have != zone {
			continue
		}
		if err := f.obj().Call(fwdZoneIface+".removeSource", 0, zone, s).Err; err != nil {
			errs = append(errs, fmt.Errorf("firewalld removeSource %s from zone %q: %w", s, zone, err))
		}
	}
	return errors.Join(errs...)
}

// checkSources fails when a source of ips is not in zone.
func (f *firewalld) checkSources(zone string, ips []net.IP) error {
	var errs []error
	for _, ip := range ips {
		have, err := f.zoneOf(ip.String())
		switch {
		case err != nil:
			errs = append(errs, err)
		case have == "": // a firewall-cmd --reload drops runtime sources
			errs = append(errs, fmt.Errorf("firewalld: source %s is in no zone, want zone %q", ip, zone))
		case have != zone:
			errs = append(errs, fmt.Errorf("firewalld: source %s is in zone %q, not %q", ip, have, zone))
		}
	}
	return errors.Join(errs...)
}

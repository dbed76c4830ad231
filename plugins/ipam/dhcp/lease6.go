package dhcp

import (
	"context"
	"errors"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
)

// lease6 is a DHCPv6 IA_NA lease.
type lease6 struct {
	addr string
}

func (d *daemon) acquire6(ctx context.Context, rec *record, conf *Config) (*lease6, error) {
	return nil, errors.New("ipam.ipFamilies: DHCPv6 is not implemented yet")
}

func lease6FromRecord(r *v6Rec) (*lease6, error) {
	return nil, errors.New("DHCPv6 record: not implemented yet")
}

func (l *lease6) toRecord() *v6Rec                         { return nil }
func (l *lease6) expiry() time.Time                        { return time.Time{} }
func (l *lease6) t1() time.Time                            { return time.Time{} }
func (l *lease6) ipConfig() *current.IPConfig              { return nil }
func (l *lease) refresh6(context.Context, time.Time) error { return nil }
func (l *lease) release6() error                           { return nil }

package netfilter

import (
	"errors"
	"net"
)

var errNotImplemented = errors.New("not implemented")

type iptablesMasq struct{}

func newIPTablesMasq() *iptablesMasq                        { return &iptablesMasq{} }
func (m *iptablesMasq) Backend() string                     { return BackendIPTables }
func (m *iptablesMasq) Setup(o Owner, a []*net.IPNet) error { return errNotImplemented }
func (m *iptablesMasq) Teardown(o Owner) error              { return errNotImplemented }
func (m *iptablesMasq) Check(o Owner, a []*net.IPNet) error { return errNotImplemented }
func (m *iptablesMasq) GC(n string, keep []Owner) error     { return errNotImplemented }
func (m *iptablesMasq) teardownIfUsable(o Owner) error      { return errNotImplemented }

type nftablesMasq struct{}

func newNFTablesMasq() *nftablesMasq                        { return &nftablesMasq{} }
func (m *nftablesMasq) Backend() string                     { return BackendNFTables }
func (m *nftablesMasq) Setup(o Owner, a []*net.IPNet) error { return errNotImplemented }
func (m *nftablesMasq) Teardown(o Owner) error              { return errNotImplemented }
func (m *nftablesMasq) Check(o Owner, a []*net.IPNet) error { return errNotImplemented }
func (m *nftablesMasq) GC(n string, keep []Owner) error     { return errNotImplemented }
func (m *nftablesMasq) teardownIfUsable(o Owner) error      { return errNotImplemented }

func defaultMasq() (Masq, error) { return nil, errNotImplemented }

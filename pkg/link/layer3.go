package link

import (
	"encoding/json"
	"errors"

	"github.com/cniforge/plugins/pkg/attach"
	"github.com/cniforge/plugins/pkg/result"
)

// Layer3 reports whether c configures addresses: "ipam" absent, null or
// {} means layer 2 only (the link comes up without addresses). An "ipam"
// with keys but no "type" is layer 2 too when typelessL2 (upstream's
// macvlan and ipvlan take it so: isLayer3 := IPAM.Type != ""); otherwise
// it is refused (code 7): it asks for addresses and names no plugin to get
// them from (upstream's vlan fails on it too). Pure.
func Layer3(c *attach.NetConf, typelessL2 bool) (bool, error) {
	if c.HasIPAM() {
		return true, nil
	}
	if typelessL2 {
		return false, nil
	}
	var raw struct {
		IPAM map[string]json.RawMessage `json:"ipam"`
	}
	_ = json.Unmarshal(c.Raw, &raw) // decoded successfully by attach.Decode
	if len(raw.IPAM) > 0 {
		return false, result.InvalidConfig(errors.New(`ipam.type: missing ("ipam": {} or no "ipam" means layer 2 only)`))
	}
	return false, nil
}

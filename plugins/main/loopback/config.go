package loopback

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/cniforge/plugins/pkg/result"
)

// netConf is loopback's config: it has no keys of its own.
type netConf struct {
	types.NetConf
	prevResult *current.Result
}

// parseConfig decodes and validates stdin. It touches no kernel state.
func parseConfig(stdin []byte) (*netConf, error) {
	conf := &netConf{}
	if err := json.Unmarshal(stdin, &conf.NetConf); err != nil {
		return nil, result.Decoding(fmt.Errorf("parse config: %w", err))
	}
	if conf.Name == "" {
		return nil, result.InvalidConfig(errors.New("name: missing"))
	}
	prev, err := result.ParsePrev(&conf.NetConf)
	if err != nil {
		return nil, err
	}
	conf.prevResult = prev
	return conf, nil
}

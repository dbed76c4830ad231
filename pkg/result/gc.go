package result

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

const (
	// ValidAttachmentsKey carries GC's list of attachments still in use.
	ValidAttachmentsKey = "cni.dev/valid-attachments"
	// attachmentsKey is the name an earlier draft of spec 1.1.0 gave the
	// same list; libcni sends both.
	attachmentsKey = "cni.dev/attachments"
)

// GCAttachments returns the attachments a GC call lists as still in use.
//
// An absent key, null and [] all mean that no attachment of this network is
// valid: cnitool and libcni's GCNetworkList(ctx, list, nil) send no key, and
// libcni has already run DEL for every cached attachment in that call, so to
// the runtime "no list" means "nothing is in use". GC then releases everything
// the plugin holds for the network.
//
// A key that is present but malformed is refused (code 7, naming the key and,
// for a bad entry, its index): an entry that is not an object with string
// containerID and ifname, [null] and [{}] included, must not be read as an
// empty list, because that would wipe the attachment it meant to keep.
func GCAttachments(stdin []byte) ([]types.GCAttachment, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &obj); err != nil {
		return nil, Decoding(fmt.Errorf("parse config: %w", err))
	}
	key := ValidAttachmentsKey
	raw, ok := obj[key]
	if !ok {
		key = attachmentsKey
		raw, ok = obj[key]
	}
	if !ok {
		return nil, nil
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, InvalidConfig(fmt.Errorf("%s: want a list of {\"containerID\", \"ifname\"} objects: %w", key, err))
	}
	list := make([]types.GCAttachment, 0, len(entries))
	for i, e := range entries {
		a, err := gcAttachment(e)
		if err != nil {
			return nil, InvalidConfig(fmt.Errorf("%s[%d]: %w", key, i, err))
		}
		list = append(list, a)
	}
	return list, nil
}

// gcAttachment parses one entry of the GC list: an object whose containerID
// and ifname are non-empty strings.
func gcAttachment(raw json.RawMessage) (types.GCAttachment, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return types.GCAttachment{}, fmt.Errorf("%s: want an object with string \"containerID\" and \"ifname\"", raw)
	}
	var a types.GCAttachment
	for _, f := range []struct {
		key string
		dst *string
	}{{"containerID", &a.ContainerID}, {"ifname", &a.IfName}} {
		v, ok := fields[f.key]
		if !ok {
			return a, fmt.Errorf("%q: missing", f.key)
		}
		if err := json.Unmarshal(v, f.dst); err != nil || *f.dst == "" {
			return a, fmt.Errorf("%q: %s is not a non-empty string", f.key, v)
		}
	}
	return a, nil
}

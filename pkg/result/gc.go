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
// An absent list is refused (code 7) rather than read as "none": every
// plugin that GCs deletes the state of each attachment not listed, so a
// caller that dropped the key would wipe the whole network. libcni always
// sends it, null when nothing is in use; null and [] mean none.
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
		return nil, InvalidConfig(fmt.Errorf("%s: missing; GC without it would remove the state of every attachment", ValidAttachmentsKey))
	}
	var list []types.GCAttachment
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, InvalidConfig(fmt.Errorf("%s: want a list of {\"containerID\", \"ifname\"} objects: %w", key, err))
	}
	return list, nil
}

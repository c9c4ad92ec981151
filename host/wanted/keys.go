package wanted

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// Key layout (docs/wire-format.md, "NATS buckets and keys"). A key token is
// one NATS subject token: letters, digits, '-', '_', '=' and '/'; '.' only
// separates tokens.
//
//	jobs:         <namespace>.<job_id>
//	nodes:        <node_id>                (bucket-wide TTL: the heartbeat)
//	node intents: <node_id>                (operator's drain/eligibility)
//	allocs:       <node_id>.<alloc_id>
//	deployments:  <namespace>.<job_id>.<job_version>

// ValidToken reports whether s can be one token of a key.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '=', r == '/':
		default:
			return false
		}
	}
	return true
}

// CheckTokens returns an error naming the first part that cannot be a key
// token. Writers call it before building a key.
func CheckTokens(parts ...string) error {
	for _, p := range parts {
		if !ValidToken(p) {
			return fmt.Errorf("%q cannot be part of a KV key (allowed: letters, digits, '-', '_', '=', '/')", p)
		}
	}
	return nil
}

func namespaceOr(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// JobKey is the jobs-bucket key of a job; an empty namespace is "default".
func JobKey(namespace, jobID string) string { return namespaceOr(namespace) + "." + jobID }

// ParseJobKey splits a jobs-bucket key.
func ParseJobKey(key string) (namespace, jobID string, ok bool) {
	ns, id, ok := strings.Cut(key, ".")
	if !ok || !ValidToken(ns) || !ValidToken(id) {
		return "", "", false
	}
	return ns, id, true
}

// NodeKey is the nodes-bucket (and node-intents-bucket) key of a node.
func NodeKey(nodeID string) string { return nodeID }

// AllocKey is the allocations-bucket key of an allocation.
func AllocKey(nodeID, allocID string) string { return nodeID + "." + allocID }

// ParseAllocKey splits an allocations-bucket key.
func ParseAllocKey(key string) (nodeID, allocID string, ok bool) {
	n, a, ok := strings.Cut(key, ".")
	if !ok || !ValidToken(n) || !ValidToken(a) {
		return "", "", false
	}
	return n, a, true
}

// AllocKeyPrefix is the watch filter of one node's allocations.
func AllocKeyPrefix(nodeID string) string { return nodeID + ".>" }

// DeploymentKey is the deployments-bucket key of a job version's deployment:
// one per job version, so that two hosts creating it race on Create.
func DeploymentKey(namespace, jobID string, version uint64) string {
	return namespaceOr(namespace) + "." + jobID + "." + strconv.FormatUint(version, 10)
}

// ParseDeploymentKey splits a deployments-bucket key.
func ParseDeploymentKey(key string) (namespace, jobID string, version uint64, ok bool) {
	parts := strings.Split(key, ".")
	if len(parts) != 3 || !ValidToken(parts[0]) || !ValidToken(parts[1]) {
		return "", "", 0, false
	}
	v, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil {
		return "", "", 0, false
	}
	return parts[0], parts[1], v, true
}

// OwnsNodeKey reports whether the host with nodeID may write key in the nodes
// bucket: only its own record.
func OwnsNodeKey(nodeID, key string) bool { return nodeID != "" && key == NodeKey(nodeID) }

// OwnsAllocKey reports whether the host with nodeID may write key in the
// allocations bucket: only its own allocations.
func OwnsAllocKey(nodeID, key string) bool {
	n, _, ok := ParseAllocKey(key)
	return ok && n == nodeID
}

// ErrNotOwner is returned by writers asked to write a key this host does not own.
var ErrNotOwner = errors.New("this host does not own the key")

// Intent is an operator's wish about a node (drain, eligibility), written by
// the CLI to the node-intents bucket. Only the owning agent writes the node
// record; it merges the intent with MergeIntent on its next heartbeat.
type Intent struct {
	// Eligibility is the operator's eligibility; "" means eligible.
	Eligibility model.Eligibility `json:"eligibility,omitempty"`
	// Drain, when set, asks the node to drain; draining implies ineligible.
	Drain     *model.DrainStrategy `json:"drain,omitempty"`
	UpdatedAt time.Time            `json:"updated_at,omitzero"`
}

// DecodeIntent decodes an intent, closed.
func DecodeIntent(value []byte) (Intent, error) {
	var in Intent
	if err := checkSize(value); err != nil {
		return in, err
	}
	if err := model.Decode(value, &in); err != nil {
		return Intent{}, fmt.Errorf("decoding node intent: %w", err)
	}
	return in, nil
}

// EncodeIntent is the wire form of an intent.
func EncodeIntent(in Intent) ([]byte, error) { return json.Marshal(in) }

// MergeIntent returns the node record with the operator's intent applied: the
// drain strategy, and eligibility (ineligible while draining).
func MergeIntent(n model.Node, in Intent) model.Node {
	n.Drain = in.Drain
	n.Eligibility = model.Eligible
	if in.Eligibility == model.Ineligible || in.Drain != nil {
		n.Eligibility = model.Ineligible
	}
	return n
}

// IntentState is what a host holds for one node-intents key.
type IntentState = Record[Intent]

func decodeIntentRecord(_ string, value []byte) (*Intent, error) {
	in, err := DecodeIntent(value)
	if err != nil {
		return nil, err
	}
	return &in, nil
}

// ApplyIntent applies a node-intents-bucket entry. A deleted intent means
// "no operator wish": eligible, not draining (IntentOf).
func ApplyIntent(prev IntentState, e Entry) (IntentState, Effect) {
	return Apply(prev, e, decodeIntentRecord)
}

// IntentOf returns the intent in force: the zero Intent when there is none
// or its key was deleted.
func IntentOf(s IntentState) Intent {
	if s.Value == nil || s.Absent {
		return Intent{}
	}
	return *s.Value
}

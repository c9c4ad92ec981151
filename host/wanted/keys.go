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
//	allocs:       <node_id>.<namespace>.<job_id>.<alloc_id>   (a watch can filter by node or job)
//	deployments:  <namespace>.<job_id>.<job_version>
//	job_versions: <namespace>.<job_id>.<job_version>           (immutable specs, for reverts)
//	rollout:      slot.<namespace>.<job_id>.<group>.<index>     (per-key TTL: update slots)
//	              down.<node_id>.<nodes-revision>               (loss verdicts)
//	              sum.<namespace>.<job_id>                      (rollout summaries: one writer, the steward)

// NodeSubject is the core NATS subject <prefix>.<service>.<node_id> on
// which one node is reached (its logs, its allocations' details, a slot's
// release hint), once prefix and node ID are each one valid token.
func NodeSubject(prefix, service, nodeID string) (string, error) {
	if !ValidToken(prefix) {
		return "", fmt.Errorf("bucket prefix %q cannot be a NATS subject token (allowed: letters, digits, '-', '_', '=', '/')", prefix)
	}
	if !ValidToken(nodeID) {
		return "", fmt.Errorf("node ID %q cannot be a NATS subject token (allowed: letters, digits, '-', '_', '=', '/')", nodeID)
	}
	return prefix + "." + service + "." + nodeID, nil
}

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

// NamespaceOr is ns, or DefaultNamespace when it is empty: an empty
// namespace and "default" name one namespace (JobKey).
func NamespaceOr(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// JobKey is the jobs-bucket key of a job; an empty namespace is "default".
func JobKey(namespace, jobID string) string { return NamespaceOr(namespace) + "." + jobID }

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

// AllocKey is the allocations-bucket key of an allocation: it carries the
// node and the job, so a watch can take one node's allocations
// (AllocKeyPrefix) or one job's (AllocJobFilter) by subject filter.
func AllocKey(nodeID, namespace, jobID, allocID string) string {
	return nodeID + "." + NamespaceOr(namespace) + "." + jobID + "." + allocID
}

// ParseAllocKey splits an allocations-bucket key into its node and
// allocation.
func ParseAllocKey(key string) (nodeID, allocID string, ok bool) {
	n, _, _, a, ok := ParseAllocKeyFull(key)
	return n, a, ok
}

// ParseAllocKeyFull splits an allocations-bucket key into all its parts.
func ParseAllocKeyFull(key string) (nodeID, namespace, jobID, allocID string, ok bool) {
	parts := strings.Split(key, ".")
	if len(parts) != 4 {
		return "", "", "", "", false
	}
	for _, p := range parts {
		if !ValidToken(p) {
			return "", "", "", "", false
		}
	}
	return parts[0], parts[1], parts[2], parts[3], true
}

// AllocKeyPrefix is the watch filter of one node's allocations.
func AllocKeyPrefix(nodeID string) string { return nodeID + ".>" }

// AllocJobFilter is the watch filter of one job's allocations, on every node.
func AllocJobFilter(namespace, jobID string) string {
	return "*." + NamespaceOr(namespace) + "." + jobID + ".*"
}

// JobVersionKey is the job_versions-bucket key of one version of a job.
func JobVersionKey(namespace, jobID string, version uint64) string {
	return DeploymentKey(namespace, jobID, version)
}

// SlotKey is the rollout-bucket key of update slot index of a job group.
// The version is not in the key: a job's versions share its slots.
func SlotKey(namespace, jobID, group string, index int) string {
	return "slot." + NamespaceOr(namespace) + "." + jobID + "." + GroupToken(group) + "." + strconv.Itoa(index)
}

// SlotPrefix is the rollout-bucket filter of every slot of a job.
func SlotPrefix(namespace, jobID string) string {
	return "slot." + NamespaceOr(namespace) + "." + jobID + "."
}

// SlotFilter is the watch filter of one job's update slots.
func SlotFilter(namespace, jobID string) string { return SlotPrefix(namespace, jobID) + ">" }

// DownFilter and SummaryFilter are the watch filters of every loss verdict
// and of every job's rollout summary in the rollout bucket.
const (
	DownFilter    = "down.>"
	SummaryFilter = "sum.>"
)

// ParseSlotKey splits a rollout-bucket slot key.
func ParseSlotKey(key string) (namespace, jobID, groupToken string, index int, ok bool) {
	parts := strings.Split(key, ".")
	if len(parts) != 5 || parts[0] != "slot" {
		return "", "", "", 0, false
	}
	for _, p := range parts[1:] {
		if !ValidToken(p) {
			return "", "", "", 0, false
		}
	}
	i, err := strconv.Atoi(parts[4])
	if err != nil || i < 0 {
		return "", "", "", 0, false
	}
	return parts[1], parts[2], parts[3], i, true
}

// GroupToken is a group name as one key token: the name itself when it is
// a valid token that does not start with '=', else '=' and the hex of its
// bytes (so the two forms never collide).
func GroupToken(group string) string {
	if ValidToken(group) && !strings.HasPrefix(group, "=") {
		return group
	}
	return "=" + fmt.Sprintf("%x", group)
}

// DeploymentKey is the deployments-bucket key of a job version's deployment:
// one per job version, so that two hosts creating it race on Create.
func DeploymentKey(namespace, jobID string, version uint64) string {
	return NamespaceOr(namespace) + "." + jobID + "." + strconv.FormatUint(version, 10)
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
	// (the node is the first token of every allocation key)
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

// DownKey is the rollout-bucket key of the verdict on one loss of a node:
// the nodes-bucket revision of its expiry marker names the loss.
func DownKey(nodeID string, revision uint64) string {
	return "down." + nodeID + "." + strconv.FormatUint(revision, 10)
}

// ParseDownKey splits a loss verdict key.
func ParseDownKey(key string) (nodeID string, revision uint64, ok bool) {
	parts := strings.Split(key, ".")
	if len(parts) != 3 || parts[0] != "down" || !ValidToken(parts[1]) {
		return "", 0, false
	}
	rev, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return parts[1], rev, true
}

// SummaryKey is the rollout-bucket key of a job's rollout summary (one per
// job: each deployment's steward overwrites it).
func SummaryKey(namespace, jobID string) string {
	return "sum." + NamespaceOr(namespace) + "." + jobID
}

// ParseSummaryKey splits a rollout-bucket summary key.
func ParseSummaryKey(key string) (namespace, jobID string, ok bool) {
	parts := strings.Split(key, ".")
	if len(parts) != 3 || parts[0] != "sum" || !ValidToken(parts[1]) || !ValidToken(parts[2]) {
		return "", "", false
	}
	return parts[1], parts[2], true
}

package policies

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/internal/policywire"
)

// ABIVersion is the newest module ABI this engine implements
// (docs/policy-abi.md); it also runs modules of every version from
// MinABIVersion on, sending each the input layout of its own version.
const ABIVersion = policywire.ABIVersion

// MinABIVersion is the oldest module ABI this engine runs: version 1, whose
// completion input has no disruption and no loss counts.
const MinABIVersion = policywire.MinABIVersion

// Kind is a bit set of the decisions a module implements.
type Kind int32

// The decision kinds, as the hivelet_kinds export reports them.
const (
	KindCanary     Kind = policywire.KindCanary
	KindCompletion Kind = policywire.KindCompletion
)

func (k Kind) String() string {
	var parts []string
	if k&KindCanary != 0 {
		parts = append(parts, "canary")
	}
	if k&KindCompletion != 0 {
		parts = append(parts, "completion")
	}
	if k&^(KindCanary|KindCompletion) != 0 {
		parts = append(parts, fmt.Sprintf("unknown(%#x)", int32(k&^(KindCanary|KindCompletion))))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// The exports of ABI version 1.
const (
	exportABIVersion = "hivelet_abi_version"
	exportKinds      = "hivelet_kinds"
	exportManifest   = "hivelet_manifest"
	exportAlloc      = "hivelet_alloc"
	exportCanary     = "hivelet_canary"
	exportCompletion = "hivelet_completion"
	exportMemory     = "memory"
	exportReserve    = "hivelet_reserve" // optional

)

// appendCanaryInput encodes a canary request straight from the node
// records, sending the fixed fields and keys the manifest asked for.
func appendCanaryInput(b []byte, req *reconcile.CanaryRequest, fields byte, attr, meta []string) []byte {
	c := policywire.Canary{JobID: req.JobID, JobVersion: req.JobVersion, DeploymentID: req.DeploymentID, Group: req.Group,
		Percent: req.Percent, Count: req.Count, Params: params(req.Policy), Existing: req.Existing}
	return policywire.AppendCanaryInput(b, &c, fields, attr, meta, modelNodes(req.Eligible))
}

// modelNodes are node records as the canary input encoder reads them.
type modelNodes []*model.Node

func (ns modelNodes) Len() int { return len(ns) }

func (ns modelNodes) Fixed(i int) policywire.NodeFields {
	n := ns[i]
	return policywire.NodeFields{ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodePool: n.NodePool, Class: n.Class}
}

func (ns modelNodes) Attribute(i int, key string) (string, bool) {
	v, ok := ns[i].Attributes[key]
	return v, ok
}

func (ns modelNodes) Meta(i int, key string) (string, bool) {
	v, ok := ns[i].Meta[key]
	return v, ok
}

func params(ref *model.PolicyRef) map[string]string {
	if ref == nil {
		return nil
	}
	return ref.Params
}

// completionGroups is the completion input's group list: every group of the
// deployment or of the health summary, sorted by name.
func completionGroups(in *reconcile.CompletionInput) []policywire.Group {
	var names []string
	if in.Deployment != nil {
		for n := range in.Deployment.TaskGroups {
			names = append(names, n)
		}
	}
	for n := range in.Groups {
		if in.Deployment == nil || in.Deployment.TaskGroups[n] == nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	groups := make([]policywire.Group, len(names))
	for i, n := range names {
		g := policywire.Group{Name: n}
		if in.Deployment != nil {
			if s := in.Deployment.TaskGroups[n]; s != nil {
				g.DesiredTotal, g.DesiredCanaries = s.DesiredTotal, s.DesiredCanaries
				g.AutoRevert, g.AutoPromote, g.Promoted = s.AutoRevert, s.AutoPromote, s.Promoted
				g.ProgressDeadline = time.Duration(s.ProgressDeadline)
				g.RequireProgressBy = s.RequireProgressBy
			}
		}
		h := in.Groups[n]
		g.Placed, g.Healthy, g.Unhealthy, g.Pending = h.Placed, h.Healthy, h.Unhealthy, h.Pending
		g.CanariesHealthy, g.Complete = h.CanariesHealthy, h.Complete
		g.LostInFlight, g.Lost, g.Disconnected = h.LostInFlight, h.Lost, h.Disconnected
		groups[i] = g
	}
	return groups
}

// completionInput converts the reconciler's input to the wire's value.
func completionInput(in *reconcile.CompletionInput) policywire.Completion {
	ci := policywire.Completion{Disruption: in.Disruption, Now: in.Now, Params: params(in.Policy), Groups: completionGroups(in)}
	if d := in.Deployment; d != nil {
		ci.DeploymentID, ci.JobID, ci.JobVersion, ci.Status = d.ID, d.JobID, d.JobVersion, string(d.Status)
	}
	return ci
}

// validateCanary checks a canary answer strictly against its request.
func validateCanary(req *reconcile.CanaryRequest, out policywire.CanaryOutput) error {
	if len(out.NodeIDs) > max(req.Count, 0) {
		return fmt.Errorf("answered %d canaries, %d asked for", len(out.NodeIDs), req.Count)
	}
	if len(out.NodeIDs) < req.Count && strings.TrimSpace(out.Reason) == "" {
		return fmt.Errorf("answered %d canaries of %d asked for without a reason", len(out.NodeIDs), req.Count)
	}
	eligible := req.Eligible
	byID := func(a *model.Node, id string) int { return strings.Compare(a.ID, id) }
	if !slices.IsSortedFunc(eligible, func(a, b *model.Node) int { return strings.Compare(a.ID, b.ID) }) {
		eligible = slices.Clone(eligible)
		slices.SortFunc(eligible, func(a, b *model.Node) int { return strings.Compare(a.ID, b.ID) })
	}
	seen := make(map[string]struct{}, len(out.NodeIDs))
	for _, id := range out.NodeIDs {
		if _, ok := slices.BinarySearchFunc(eligible, id, byID); !ok {
			return fmt.Errorf("answered node %q, which is not an eligible node", id)
		}
		if _, dup := seen[id]; dup {
			return fmt.Errorf("answered node %q twice", id)
		}
		seen[id] = struct{}{}
	}
	return nil
}

// validateCompletion checks a completion answer against its input: revert
// only when a group has auto_revert (the decoder already refused unknown
// decisions and revert without fail).
func validateCompletion(in *reconcile.CompletionInput, out policywire.CompletionOutput) error {
	if !out.Revert {
		return nil
	}
	if in.Deployment != nil {
		for _, s := range in.Deployment.TaskGroups {
			if s != nil && s.AutoRevert {
				return nil
			}
		}
	}
	return errors.New("answered revert, but no group has auto_revert")
}

func seedOf(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

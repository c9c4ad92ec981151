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
	"github.com/hivelet/hivelet/sdk/policy"
)

// ABIVersion is the newest module ABI this engine implements
// (docs/policy-abi.md); it also runs modules of every version from
// MinABIVersion on, sending each the input layout of its own version.
const ABIVersion = policy.ABIVersion

// MinABIVersion is the oldest module ABI this engine runs: version 1, whose
// completion input has no disruption and no loss counts.
const MinABIVersion = 1

// Kind is a bit set of the decisions a module implements.
type Kind int32

// The decision kinds, as the hivelet_kinds export reports them.
const (
	KindCanary     Kind = policy.KindCanary
	KindCompletion Kind = policy.KindCompletion
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

// appendCanaryInput encodes a canary request straight from the node records
// (the SDK's AppendCanaryInput, without building intermediate values).
func appendCanaryInput(b []byte, req *reconcile.CanaryRequest, fields byte, attr, meta []string) []byte {
	b = policy.AppendString(b, req.JobID)
	b = policy.AppendUvarint(b, req.JobVersion)
	b = policy.AppendString(b, req.DeploymentID)
	b = policy.AppendString(b, req.Group)
	b = policy.AppendUvarint(b, uint64(max(req.Percent, 0)))
	b = policy.AppendUvarint(b, uint64(max(req.Count, 0)))
	b = appendParams(b, params(req.Policy))
	b = append(b, fields)
	b = policy.AppendUvarint(b, uint64(len(attr)))
	for _, k := range attr {
		b = policy.AppendString(b, k)
	}
	b = policy.AppendUvarint(b, uint64(len(meta)))
	for _, k := range meta {
		b = policy.AppendString(b, k)
	}
	b = policy.AppendUvarint(b, uint64(len(req.Eligible)))
	for _, n := range req.Eligible {
		b = policy.AppendString(b, n.ID)
		if fields&policy.FieldName != 0 {
			b = policy.AppendString(b, n.Name)
		}
		if fields&policy.FieldDatacenter != 0 {
			b = policy.AppendString(b, n.Datacenter)
		}
		if fields&policy.FieldNodePool != 0 {
			b = policy.AppendString(b, n.NodePool)
		}
		if fields&policy.FieldClass != 0 {
			b = policy.AppendString(b, n.Class)
		}
		for _, k := range attr {
			v, ok := n.Attributes[k]
			b = policy.AppendOptString(b, v, ok)
		}
		for _, k := range meta {
			v, ok := n.Meta[k]
			b = policy.AppendOptString(b, v, ok)
		}
	}
	b = policy.AppendUvarint(b, uint64(len(req.Existing)))
	for _, id := range req.Existing {
		b = policy.AppendString(b, id)
	}
	return b
}

func params(ref *model.PolicyRef) map[string]string {
	if ref == nil {
		return nil
	}
	return ref.Params
}

func appendParams(b []byte, p map[string]string) []byte {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = policy.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = policy.AppendString(b, k)
		b = policy.AppendString(b, p[k])
	}
	return b
}

// completionGroups is the completion input's group list: every group of the
// deployment or of the health summary, sorted by name.
func completionGroups(in *reconcile.CompletionInput) []policy.Group {
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
	groups := make([]policy.Group, len(names))
	for i, n := range names {
		g := policy.Group{Name: n}
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

// completionInput converts the reconciler's input to the SDK's value.
func completionInput(in *reconcile.CompletionInput) policy.CompletionInput {
	ci := policy.CompletionInput{Disruption: in.Disruption, Now: in.Now, Params: params(in.Policy), Groups: completionGroups(in)}
	if d := in.Deployment; d != nil {
		ci.DeploymentID, ci.JobID, ci.JobVersion, ci.Status = d.ID, d.JobID, d.JobVersion, string(d.Status)
	}
	return ci
}

// validateCanary checks a canary answer strictly against its request.
func validateCanary(req *reconcile.CanaryRequest, out policy.CanaryOutput) error {
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
func validateCompletion(in *reconcile.CompletionInput, out policy.CompletionOutput) error {
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

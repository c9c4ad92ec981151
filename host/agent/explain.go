package agent

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/typo"
)

// Filter names of a PlacementReport, in the order PlacesOn applies them.
const (
	FilterDatacenter = "datacenter"
	FilterNodePool   = "node pool"
	FilterConstraint = "constraint"
	FilterVolume     = "host volume"
	FilterHostNet    = "host network"
	FilterNotReady   = "node not ready"
	FilterDriver     = "driver"
)

// Exclusion is the nodes one filter kept from a job: each node is counted
// under the first filter it fails, the order PlacesOn checks them in.
type Exclusion struct {
	Filter string `json:"filter"`
	// What names the filter's value: `${attr.kernel.name} = windows` for a
	// constraint, "dokcer" missing for a driver, the job's datacenters.
	What  string   `json:"what"`
	Nodes []string `json:"nodes"`
	// Hint is a suggestion: a driver name that exists on the fleet's
	// nodes ("did you mean docker?"), a datacenter that does.
	Hint string `json:"hint,omitempty"`
}

// PlacementReport says, for a job and the fleet's nodes, how many nodes
// run it and which filter excluded each of the others. It is what
// `job run` and `job status` print when a job places on fewer nodes than
// the fleet has; ExplainPlacement is pure, and its Eligible count is
// PlacesOn's by construction (TestTheReportAgreesWithPlacesOn).
type PlacementReport struct {
	Nodes    int         `json:"nodes"`
	Eligible []string    `json:"eligible"`
	Excluded []Exclusion `json:"excluded,omitempty"`
}

// ExplainPlacement sorts nodes into the ones that run job and the ones
// each filter excluded.
func ExplainPlacement(job *model.Job, nodes []*model.Node) PlacementReport {
	r := PlacementReport{Nodes: len(nodes), Eligible: []string{}}
	index := map[string]int{}
	add := func(filter, what, hint, node string) {
		key := filter + "\x00" + what
		i, ok := index[key]
		if !ok {
			i = len(r.Excluded)
			index[key] = i
			r.Excluded = append(r.Excluded, Exclusion{Filter: filter, What: what, Hint: hint})
		}
		r.Excluded[i].Nodes = append(r.Excluded[i].Nodes, node)
	}
	known := fleetValues(nodes)
	for _, n := range nodes {
		if n == nil {
			continue
		}
		filter, what, hint := firstExclusion(job, n, known)
		if filter == "" {
			r.Eligible = append(r.Eligible, n.ID)
			continue
		}
		add(filter, what, hint, n.ID)
	}
	sort.SliceStable(r.Excluded, func(i, j int) bool { return len(r.Excluded[i].Nodes) > len(r.Excluded[j].Nodes) })
	return r
}

// rawExecDriver is the built-in raw_exec driver's name
// (plugins/builtin.RawExec): a node without it has it off, as every agent
// does unless its configuration enables it, and the report says so
// (rawExecOff) rather than "missing".
const rawExecDriver = "raw_exec"

const rawExecOff = "raw_exec runs tasks as the agent's user, not isolated, so an agent serves it only with raw_exec { enabled = true } in its configuration, as in Nomad"

// fleetKnown is what exists on the fleet's nodes, for suggestions.
type fleetKnown struct{ drivers, datacenters, pools []string }

func fleetValues(nodes []*model.Node) fleetKnown {
	var k fleetKnown
	for _, n := range nodes {
		if n == nil {
			continue
		}
		for d, info := range n.Drivers {
			if info.Detected && !slices.Contains(k.drivers, d) {
				k.drivers = append(k.drivers, d)
			}
		}
		if !slices.Contains(k.datacenters, n.Datacenter) {
			k.datacenters = append(k.datacenters, n.Datacenter)
		}
		if !slices.Contains(k.pools, n.NodePool) {
			k.pools = append(k.pools, n.NodePool)
		}
	}
	slices.Sort(k.drivers)
	slices.Sort(k.datacenters)
	slices.Sort(k.pools)
	return k
}

// firstExclusion is the first filter n fails for job ("" when it runs it):
// the checks of inScope, Ready/Tainted and driversHealthy, one by one.
func firstExclusion(job *model.Job, n *model.Node, known fleetKnown) (filter, what, hint string) {
	if len(job.Datacenters) > 0 {
		dcOnly := &model.Job{Datacenters: job.Datacenters}
		if !inScope(dcOnly, n) {
			what = "job wants " + strings.Join(job.Datacenters, ", ")
			var near []string
			anyExists := false
			for _, dc := range job.Datacenters {
				for _, k := range known.datacenters {
					if inScope(&model.Job{Datacenters: []string{dc}}, &model.Node{Datacenter: k}) {
						anyExists = true
					}
				}
				if s := closest(dc, known.datacenters); s != "" {
					near = append(near, s)
				}
			}
			switch {
			case anyExists:
				hint = "the node is in " + n.Datacenter
			case len(near) > 0:
				hint = "did you mean " + strings.Join(near, ", ") + "?"
			default:
				hint = "the nodes are in " + strings.Join(known.datacenters, ", ")
			}
			return FilterDatacenter, what, hint
		}
	}
	if pool := job.NodePool; pool != "" && pool != "all" && pool != n.NodePool {
		if s := closest(pool, known.pools); s != "" {
			hint = "did you mean " + s + "?"
		} else {
			hint = "the nodes are in " + strings.Join(known.pools, ", ")
		}
		return FilterNodePool, "job wants " + pool, hint
	}
	cons := append([]model.Constraint(nil), job.Constraints...)
	for _, g := range job.Groups {
		cons = append(cons, g.Constraints...)
	}
	for _, c := range cons {
		if !constraintHolds(n, c) {
			v, ok := nodeValue(n, c.Attribute)
			if !ok {
				hint = "the node has no " + c.Attribute
			} else if strings.HasPrefix(strings.TrimSpace(c.Attribute), "${") {
				hint = "the node's is " + fmt.Sprintf("%q", v)
			}
			return FilterConstraint, constraintText(c), hint
		}
	}
	if miss := missingHostVolumes(job, n); len(miss) > 0 {
		return FilterVolume, fmt.Sprintf("%q missing", miss[0]), offered("host volumes", "client { host_volume "+strconv.Quote(miss[0])+" { path = ... } }", n.HostVolumes, miss[0])
	}
	if miss := missingHostNetworks(job, n); len(miss) > 0 {
		return FilterHostNet, fmt.Sprintf("%q missing", miss[0]), offered("host networks", "client { host_network "+strconv.Quote(miss[0])+" { cidr = ... } }", n.HostNetworks, miss[0])
	}
	if !n.Ready() || n.Tainted() {
		return FilterNotReady, nodeState(n), ""
	}
	if bad := driversHealthy(job, n); len(bad) > 0 {
		d := bad[0]
		info, ok := n.Drivers[d]
		switch {
		case (!ok || !info.Detected) && d == rawExecDriver:
			return FilterDriver, fmt.Sprintf("%q off", d), rawExecOff
		case !ok || !info.Detected:
			if s := closest(d, known.drivers); s != "" && s != d {
				hint = "did you mean " + s + "?"
			}
			return FilterDriver, fmt.Sprintf("%q missing", d), hint
		default:
			what = fmt.Sprintf("%q unhealthy", d)
			if info.HealthDesc != "" {
				what += ": " + info.HealthDesc
			}
			return FilterDriver, what, ""
		}
	}
	return "", "", ""
}

// offered is the hint for a host volume or network a node lacks: a near
// name it has ("did you mean"), else what it has, else how the agent's
// configuration would offer it.
func offered[V any](what, how string, have map[string]V, want string) string {
	names := slices.Sorted(maps.Keys(have))
	if s := closest(want, names); s != "" && s != want {
		return "did you mean " + s + "?"
	}
	if len(names) > 0 {
		return "the node's " + what + ": " + strings.Join(names, ", ")
	}
	return "the node has no " + what + "; its agent configuration offers one with " + how
}

// constraintText writes a constraint as the job file does.
func constraintText(c model.Constraint) string {
	op := string(c.Operator)
	if op == "" {
		op = "="
	}
	switch c.Operator {
	case model.OpIsSet, model.OpIsNotSet:
		return c.Attribute + " " + op
	}
	return strings.TrimSpace(c.Attribute + " " + op + " " + c.Value)
}

func nodeState(n *model.Node) string {
	switch {
	case n.Drain != nil:
		return "draining"
	case n.Eligibility == model.Ineligible:
		return "ineligible"
	}
	return string(n.Status)
}

// closest is the known name within two edits of name, if one is.
func closest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if k == name {
			return ""
		}
		if d := typo.Distance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

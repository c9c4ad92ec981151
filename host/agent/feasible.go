package agent

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hivelet/hivelet/host/model"
)

// nodeValue resolves a constraint target such as "${attr.kernel.name}",
// "${node.datacenter}" or "${meta.rack}" against a node. ok is false when
// the node has no such value.
func nodeValue(n *model.Node, target string) (string, bool) {
	t := strings.TrimSpace(target)
	if !strings.HasPrefix(t, "${") || !strings.HasSuffix(t, "}") {
		return t, true // a literal
	}
	t = t[2 : len(t)-1]
	switch t {
	case "node.unique.id":
		return n.ID, true
	case "node.unique.name":
		return n.Name, true
	case "node.datacenter":
		return n.Datacenter, true
	case "node.class":
		return n.Class, n.Class != ""
	case "node.pool":
		return n.NodePool, true
	case "node.region":
		return "global", true
	}
	if k, ok := strings.CutPrefix(t, "attr."); ok {
		v, ok := n.Attributes[k]
		return v, ok
	}
	if k, ok := strings.CutPrefix(t, "meta."); ok {
		v, ok := n.Meta[k]
		return v, ok
	}
	return "", false
}

// constraintHolds evaluates one constraint against a node. It is pure.
func constraintHolds(n *model.Node, c model.Constraint) bool {
	lv, lok := nodeValue(n, c.Attribute)
	rv := c.Value
	switch c.Operator {
	case model.OpIsSet:
		return lok
	case model.OpIsNotSet:
		return !lok
	}
	if !lok {
		return false
	}
	switch c.Operator {
	case model.OpEqual, "":
		return lv == rv
	case model.OpNotEqual:
		return lv != rv
	case model.OpLess, model.OpLessEq, model.OpGreater, model.OpGreaterEq:
		cmp := compareValues(lv, rv)
		switch c.Operator {
		case model.OpLess:
			return cmp < 0
		case model.OpLessEq:
			return cmp <= 0
		case model.OpGreater:
			return cmp > 0
		default:
			return cmp >= 0
		}
	case model.OpRegexp:
		re, err := regexp.Compile(rv)
		return err == nil && re.MatchString(lv)
	case model.OpVersion, model.OpSemver:
		return versionMatches(lv, rv)
	case model.OpSetContains:
		have := splitSet(lv)
		for _, want := range splitSet(rv) {
			if !slices.Contains(have, want) {
				return false
			}
		}
		return true
	case model.OpSetContAny:
		have := splitSet(lv)
		for _, want := range splitSet(rv) {
			if slices.Contains(have, want) {
				return true
			}
		}
		return false
	}
	return false
}

func splitSet(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// compareValues compares numerically when both sides are numbers, else as
// text.
func compareValues(a, b string) int {
	fa, ea := strconv.ParseFloat(a, 64)
	fb, eb := strconv.ParseFloat(b, 64)
	if ea == nil && eb == nil {
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	}
	return strings.Compare(a, b)
}

// versionMatches checks a dotted version against a comma-separated list of
// "<op> <version>" terms (">= 1.2, < 2.0").
func versionMatches(v, constraint string) bool {
	for _, term := range strings.Split(constraint, ",") {
		term = strings.TrimSpace(term)
		op := "="
		for _, o := range []string{">=", "<=", "!=", ">", "<", "="} {
			if strings.HasPrefix(term, o) {
				op, term = o, strings.TrimSpace(term[len(o):])
				break
			}
		}
		c := compareVersions(v, term)
		ok := map[string]bool{"=": c == 0, "!=": c != 0, ">": c > 0, ">=": c >= 0, "<": c < 0, "<=": c <= 0}[op]
		if !ok {
			return false
		}
	}
	return true
}

func compareVersions(a, b string) int {
	pa := strings.Split(strings.TrimPrefix(a, "v"), ".")
	pb := strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(strings.SplitN(pa[i], "-", 2)[0])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(strings.SplitN(pb[i], "-", 2)[0])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// scopeSig is everything of job that inScope and driversOK read, as one
// string: two jobs with the same one place a node in scope, and find its
// drivers, alike. A new version of a job that changes only its tasks'
// images, counts or update strategy has the scope of the last version, so
// what is derived per node from the scope (the rollout facts' node list,
// the whole-fleet plan's classification) is kept across the version
// instead of walked again over the whole fleet (at 1,000 agents each walk
// is a thousand record reads per agent: BENCHMARKS.md). Whatever inScope
// or driversOK come to read of a job must be added here
// (TestScopeSigSeesEverythingTheScopeReads).
func scopeSig(job *model.Job) string {
	// Each string with its length before it, each list with its count:
	// no two different scopes write the same bytes.
	var b []byte
	str := func(v string) {
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	strs := func(vs []string) {
		b = strconv.AppendInt(b, int64(len(vs)), 10)
		b = append(b, '[')
		for _, v := range vs {
			str(v)
		}
	}
	constraints := func(cs []model.Constraint) {
		b = strconv.AppendInt(b, int64(len(cs)), 10)
		b = append(b, '(')
		for _, c := range cs {
			str(c.Attribute)
			str(string(c.Operator))
			str(c.Value)
		}
	}
	strs(job.Datacenters)
	str(job.NodePool)
	constraints(job.Constraints)
	b = strconv.AppendInt(b, int64(len(job.Groups)), 10)
	for _, g := range job.Groups {
		b = append(b, '{')
		constraints(g.Constraints)
		strs(g.HostVolumesWanted())
		strs(g.HostNetworksWanted())
		b = strconv.AppendInt(b, int64(len(g.Tasks)), 10)
		for _, t := range g.Tasks {
			str(t.Driver)
		}
	}
	return string(b)
}

// scopeMemo keeps the scopeSig of the last jobs asked (the view hands out
// the same job value until it changes).
type scopeMemo struct {
	mu   sync.Mutex
	sigs map[*model.Job]string
}

func (m *scopeMemo) of(job *model.Job) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sigs[job]; ok {
		return s
	}
	if m.sigs == nil || len(m.sigs) >= 64 {
		m.sigs = map[*model.Job]string{} // versions gone: each is signed again once
	}
	s := scopeSig(job)
	m.sigs[job] = s
	return s
}

// inScope reports whether a node is in a job's scope: its datacenter, node
// pool, job- and group-level constraints, and the host volumes and host
// networks the groups need (a node must satisfy every
// group's constraints to be in scope for the job; groups with constraints of
// their own are the rare case and are treated conservatively).
func inScope(job *model.Job, n *model.Node) bool {
	if len(job.Datacenters) > 0 {
		match := false
		for _, dc := range job.Datacenters {
			if dc == "*" || dc == n.Datacenter {
				match = true
				break
			}
			if ok, _ := pathMatch(dc, n.Datacenter); ok {
				match = true
				break
			}
		}
		if !match {
			return false
		}
	}
	pool := job.NodePool
	if pool != "" && pool != "all" && pool != n.NodePool {
		return false
	}
	for _, c := range job.Constraints {
		if !constraintHolds(n, c) {
			return false
		}
	}
	for _, g := range job.Groups {
		for _, c := range g.Constraints {
			if !constraintHolds(n, c) {
				return false
			}
		}
	}
	return len(missingHostVolumes(job, n)) == 0 && len(missingHostNetworks(job, n)) == 0
}

// missingHostVolumes are the host volumes the job's groups' volume blocks
// name (source) that the node does not offer (Node.HostVolumes), sorted.
// As with constraints, a node must have every group's.
func missingHostVolumes(job *model.Job, n *model.Node) []string {
	return missingOf(job, (*model.Group).HostVolumesWanted, func(name string) bool { _, ok := n.HostVolumes[name]; return ok })
}

// missingHostNetworks are the host networks the job's ports name that the
// node does not have (Node.HostNetworks), sorted.
func missingHostNetworks(job *model.Job, n *model.Node) []string {
	return missingOf(job, (*model.Group).HostNetworksWanted, func(name string) bool { _, ok := n.HostNetworks[name]; return ok })
}

// missingOf is the names every group of job wants that has reports absent,
// each once, sorted.
func missingOf(job *model.Job, wanted func(*model.Group) []string, has func(string) bool) []string {
	var out []string
	for _, g := range job.Groups {
		for _, name := range wanted(g) {
			if !has(name) && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// pathMatch is a tiny glob: "*" matches any run of characters.
func pathMatch(pattern, s string) (bool, error) {
	re, err := regexp.Compile("^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$")
	if err != nil {
		return false, err
	}
	return re.MatchString(s), nil
}

// driversHealthy reports whether the node has every driver the job's tasks
// use, detected and healthy; the missing or unhealthy ones are returned.
func driversHealthy(job *model.Job, n *model.Node) (bad []string) {
	for _, g := range job.Groups {
		for _, t := range g.Tasks {
			if !driverOK(n, t.Driver) && !slices.Contains(bad, t.Driver) {
				bad = append(bad, t.Driver)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// driverOK reports whether n has driver name detected and healthy.
func driverOK(n *model.Node, name string) bool {
	d, ok := n.Drivers[name]
	return ok && d.Detected && d.Healthy
}

// driversOK reports whether every driver job uses is detected and healthy
// on n (driversHealthy is empty), without building the list: the rollout
// facts ask it of every node on every pass.
func driversOK(job *model.Job, n *model.Node) bool {
	for _, g := range job.Groups {
		for _, t := range g.Tasks {
			if !driverOK(n, t.Driver) {
				return false
			}
		}
	}
	return true
}

// PlacesOn reports whether the reconciler would see n as a ready node for
// job: in scope (datacenters, node pool, constraints, host volumes and
// networks), ready and eligible,
// with every driver the job uses detected and healthy. The CLI uses it to
// know how many nodes a system job should reach.
func PlacesOn(job *model.Job, n *model.Node) bool {
	return n != nil && inScope(job, n) && n.Ready() && !n.Tainted() && driversOK(job, n)
}

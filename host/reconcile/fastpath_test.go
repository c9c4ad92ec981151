package reconcile

// The fast paths of a round must give the answers of the plain ones.

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// The round derives its IDs in a batch with the text's head encoded once;
// every ID must be AllocID's, byte for byte (plans name the same keys as
// any other caller of AllocID).
func TestABatchDerivesExactlyAllocIDsIDs(t *testing.T) {
	type call struct {
		ns, job          string
		version          uint64
		node, name, prev string
	}
	calls := []call{
		{"", "web", 2, "n1", "web.web[0]", ""},
		{"", "web", 2, "n1", "web.web[0]", "f47ac10b-58cc-4372-0000-000000005000"},
		{"prod", "api", 7, "7c9e6679-7425-40de-944b-000000005000", "api.api[12]", ""},
		{"prod", "api", 1 << 40, "n2", "api.api[3]", "a"},
		// Texts longer than the batch's scratch for them.
		{strings.Repeat("ns", 100), "api", 3, strings.Repeat("n", 300), "api.api[0]", ""},
		{"", strings.Repeat("job", 50), 3, "n3", "api.api[0]", strings.Repeat("p", 200)},
	}
	// Texts of every length across XXH3's short, middle and long cases
	// (16, 128, 240 bytes) and the batch's 128-byte scratch per kind.
	for n := 0; n <= 260; n++ {
		calls = append(calls, call{"", "web", 2, "n1", "web.web[0]", strings.Repeat("p", n)},
			call{"", "web", 2, strings.Repeat("n", n), "web.web[0]", ""})
	}
	for _, c := range calls {
		b := newIDBatch(1, c.ns, c.job, c.version) // sized for one: the buffer grows under the first ID
		got := b.alloc(c.node, c.name, c.prev)
		other := b.alloc(c.node+"x", c.name, "") // control: another text, another ID
		again := b.alloc(c.node, c.name, c.prev)
		if want := AllocID(c.ns, c.job, c.version, c.node, c.name, c.prev); got != want || again != want {
			t.Errorf("%+v: batch %q and %q, AllocID %q", c, got, again, want)
		}
		if other == got || other != AllocID(c.ns, c.job, c.version, c.node+"x", c.name, "") {
			t.Errorf("%+v: control ID %q", c, other)
		}
	}
}

// DefaultCanaries answers the reconciler's sorted requests without sorting;
// any other request (out of order, repeats) must get the same answer as
// its sorted form.
func TestTheDefaultCanaryChoiceDoesNotDependOnTheEligibleOrder(t *testing.T) {
	sorted := []*model.Node{rnode("a"), rnode("b"), rnode("c"), rnode("d")}
	messy := []*model.Node{rnode("c"), rnode("a"), rnode("d"), rnode("a"), rnode("b")}
	for count := -1; count <= 5; count++ {
		a := DefaultCanaries(CanaryRequest{Count: count, Eligible: sorted})
		b := DefaultCanaries(CanaryRequest{Count: count, Eligible: messy})
		want := []string{"a", "b", "c", "d"}[:min(max(count, 0), 4)]
		if !slices.Equal(a.NodeIDs, want) || !slices.Equal(b.NodeIDs, want) || a.NodeIDs == nil {
			t.Errorf("count %d: sorted %v, messy %v, want %v", count, a.NodeIDs, b.NodeIDs, want)
		}
	}
}

// Groups are found by comparing names in a job of up to 8 groups and
// through a map past that: both find the same groups and refuse the same
// repeats.
func TestAJobOfManyGroupsIsPlannedAsOneOfAFewGroups(t *testing.T) {
	for _, n := range []int{3, 12} {
		var groups []*model.Group
		for i := range n {
			groups = append(groups, grp(fmt.Sprintf("g%02d", i), 1))
		}
		in := fleetOf(sysJob(2, groups...), rnode("n1"))
		in.LiveAllocs = []*model.Allocation{al("a1", "n1", "g01", 0, 2), al("a2", "n1", "gone", 0, 2)}
		p := mustFleet(t, in)
		checkDecisions(t, p, map[string]string{"a1": "ignore alloc.14", "a2": "stop alloc.1", "n1/web.g00[0]": "place name.3"})
		if len(p.Place) != n-1 {
			t.Errorf("%d groups: %d placements, want %d", n, len(p.Place), n-1)
		}
		in.Job = sysJob(2, append(groups, grp("g01", 1))...)
		if _, err := ReconcileFleet(in); err == nil {
			t.Errorf("%d groups: a group declared twice was accepted", n)
		}
	}
}

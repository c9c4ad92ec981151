package state

import (
	"strings"
	"testing"
)

// Each trace alone marks a store with no allocation as lost; a store with
// records, and a truly new node (fresh store, no node ID before, nothing
// left behind), are not.
func TestAnEmptyStoreIsLostWhenAnyTraceSaysTheNodeRanAllocations(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Traces
		want string // "" : not lost
	}{
		{"a new node", Traces{StoreFresh: true}, ""},
		{"a node that never ran anything, restarted", Traces{NodeIDFile: "/s/node-id", PluginSockets: []string{"/s/p1"}}, ""},
		{"a store with records", Traces{StoreFresh: true, StoreAllocs: 2, NodeIDFile: "/s/node-id", AllocDirs: []string{"/a/x"}, FleetAllocs: []string{"n.default.web.x"}}, ""},
		{"the node ID predates a fresh store", Traces{StoreFresh: true, NodeIDFile: "/s/node-id"}, "node ID file /s/node-id predates the store"},
		{"allocation directories", Traces{AllocDirs: []string{"/a/x", "/a/y"}}, "2 allocation directories remain (/a/x, ...)"},
		{"plugins of an earlier start beside a fresh store", Traces{StoreFresh: true, PluginSockets: []string{"/s/p1"}}, "1 driver plugins of an earlier start"},
		{"live allocations in NATS", Traces{FleetAllocs: []string{"n.default.web.x"}}, "NATS holds 1 live allocations of this node (n.default.web.x)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(LostState(tc.in), "; ")
			if tc.want == "" && got != "" {
				t.Fatalf("not lost, but LostState says %q", got)
			}
			if !strings.Contains(got, tc.want) || (tc.want != "" && got == "") {
				t.Fatalf("LostState says %q, want %q", got, tc.want)
			}
		})
	}
}

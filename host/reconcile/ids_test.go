package reconcile

import (
	"regexp"
	"testing"
)

func TestDerivedIDsAreStableUUIDShapedAndDistinct(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	ids := map[string]string{
		"first":         AllocID("", "web", 2, "n1", "web.web[0]", ""),
		"first ns":      AllocID("prod", "web", 2, "n1", "web.web[0]", ""),
		"first v3":      AllocID("", "web", 3, "n1", "web.web[0]", ""),
		"first n2":      AllocID("", "web", 2, "n2", "web.web[0]", ""),
		"first name":    AllocID("", "web", 2, "n1", "web.web[1]", ""),
		"first shifted": AllocID("", "web", 2, "n1w", "eb.web[0]", ""),
		"next a":        AllocID("", "web", 2, "n1", "web.web[0]", "a"),
		"next b":        AllocID("", "web", 2, "n1", "web.web[0]", "b"),
		"next a v3":     AllocID("", "web", 3, "n1", "web.web[0]", "a"),
		"deployment":    DeploymentID("", "web", 2),
		"deployment v3": DeploymentID("", "web", 3),
		"deployment ns": DeploymentID("prod", "web", 2),
	}
	seen := map[string]string{}
	for what, id := range ids {
		if !uuid.MatchString(id) {
			t.Errorf("%s: %q is not UUID-shaped", what, id)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share the ID %s", what, other, id)
		}
		seen[id] = what
	}
	// Stable: the same inputs give the same ID (the node and name do not
	// matter once a predecessor is named).
	if AllocID("", "web", 2, "n1", "web.web[0]", "") != ids["first"] ||
		AllocID("", "web", 2, "other", "other", "a") != ids["next a"] {
		t.Error("derived IDs are not stable")
	}
}

// Derived IDs are stored, so their scheme is pinned, to be changed only
// knowingly: every agent of the fleet, of any release, must derive the
// same deployment ID; an allocation's ID may change between builds (ids.go
// says why that is safe), but a change changes what new plans write.
func TestDerivedIDsArePinnedAcrossBuilds(t *testing.T) {
	for _, c := range []struct{ what, got, want string }{
		// SHA-256, since the first release.
		{"deployment", DeploymentID("prod", "web", 2), "32176b10-22fc-b673-d8eb-1d7d3e195c65"},
		// XXH3-128 (ids.go).
		{"first placement", AllocID("", "web", 2, "n1", "web.web[0]", ""), "b555d897-c4be-f198-a8ea-902b748d7e21"},
		{"update", AllocID("", "web", 3, "n1", "web.web[0]", "f47ac10b-58cc-4372-0000-000000005000"), "425415b0-ed6b-9aae-dc0d-9c612667d1f6"},
	} {
		if c.got != c.want {
			t.Errorf("%s: derived %s, pinned %s", c.what, c.got, c.want)
		}
	}
}

// BenchmarkIDBatch is the cost of one derived ID of an update (AllocID
// with a predecessor) through a round's batch, as ReconcileFleet derives
// them: the hash and the UUID formatting.
func BenchmarkIDBatch(b *testing.B) {
	prev := make([]string, 1024)
	for i := range prev {
		prev[i] = AllocID("", "web", 1, "node", "web.web[0]", string(rune('a'+i%26))+string(rune('a'+i/26%26)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	var ids idBatch
	for i := range b.N {
		if i%len(prev) == 0 { // a round's batch: 1,024 IDs
			ids = newIDBatch(len(prev), "default", "web", 2)
		}
		_ = ids.alloc("node", "web.web[0]", prev[i%len(prev)])
	}
}

// BenchmarkAppendUUID is the formatting of one ID alone.
func BenchmarkAppendUUID(b *testing.B) {
	sum := make([]byte, 32)
	for i := range sum {
		sum[i] = byte(i * 37)
	}
	buf := make([]byte, 0, 64)
	for range b.N {
		buf = appendUUID(buf[:0], sum)
	}
}

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

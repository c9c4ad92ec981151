package agent

import (
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
)

// A kick for this node's own work (its allocations' status, the rollout
// loop's writes) waits kickCoalesce for the next one before its pass, and
// is not lost: its pass comes, counted under its cause. Any other kick
// passes without waiting (its cause counted too).
func TestAKickForOwnWorkWaitsForTheNextBeforeItsPass(t *testing.T) {
	w := newWorld(t)
	n := w.newNodeResync("n1", nil, "", time.Hour)
	defer n.stop(true)
	n.waitQuiet(t, 100*time.Millisecond) // a node with no job has no timer
	for _, cause := range []string{kickOwnStatus, kickRolloutWrites, kickOwnStatus} {
		st := n.agent.Status()
		at := time.Now()
		n.agent.KickFor(cause)
		testutil.Eventually(t, 5*time.Second, "the kick's pass", func() bool { return n.agent.Status().Passes > st.Passes })
		if took := n.agent.Status().LastPass.Sub(at); took < kickCoalesce {
			t.Fatalf("a kick %q passed %v after it, before kickCoalesce (%v)", cause, took, kickCoalesce)
		}
		if got := n.agent.Status().PassCauses[cause]; got != st.PassCauses[cause]+1 {
			t.Fatalf("passes counted for %q: %d, want %d", cause, got, st.PassCauses[cause]+1)
		}
	}
	// Another cause is not held back (nor counted under the others').
	st := n.agent.Status()
	n.agent.KickFor("kick: an allocation stopped")
	testutil.Eventually(t, 5*time.Second, "the other kick's pass", func() bool {
		return n.agent.Status().PassCauses["kick: an allocation stopped"] == st.PassCauses["kick: an allocation stopped"]+1
	})
	if !coalescedKick(kickOwnStatus) || !coalescedKick(kickRolloutWrites) || coalescedKick("kick: an allocation stopped") || coalescedKick("change: jobs") {
		t.Fatal("coalescedKick names the wrong causes")
	}
}

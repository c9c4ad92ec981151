package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
	"github.com/hivelet/hivelet/internal/testutil"
)

// The slot handoff end to end, on one NATS server with narrowed agents:
// once every slot is held, the steward's summary queues the next waiters
// on the held slots, each holder tells its slot's queued waiter of its
// release over core NATS, and that waiter takes the slot without waiting
// for the summary that shows it free. The rollout keeps its invariants:
// never more than max_parallel replacements in flight, and it completes.
// Control: the same rollout with one node advertising rollout protocol 4
// (an agent from before the handoff): the steward queues nobody, no hint
// is sent and every take waits for a summary, as before.
func TestAReleasedSlotIsHandedToTheWaiterTheSummaryQueuedOnIt(t *testing.T) {
	for _, handoff := range []bool{true, false} {
		t.Run(fmt.Sprintf("handoff=%v", handoff), func(t *testing.T) {
			f := &testFleet{w: newWorldTTL(t, 0), rec: &recorder{tasks: map[string]string{}}}
			t.Cleanup(func() {
				for _, n := range f.nodes {
					n.stopOnce(true)
				}
			})
			for i := 1; i <= 8; i++ {
				f.addWith(t, fmt.Sprintf("node-%02d", i), func(n *node) {
					if !handoff && i == 8 {
						n.protocol = rollout.AssignProtocol
					}
				})
			}
			mod := func(g *model.Group) {
				g.Update.MaxParallel = 2
				g.Update.MinHealthyTime = model.Duration(300 * time.Millisecond)
			}
			f.atV1(t, mod)
			f.w.putJob(fleetJob(2, mod))
			f.waitStatus(t, 2, model.DeploymentSuccessful, 60*time.Second)
			testutil.Eventually(t, 10*time.Second, "every node on v2", func() bool { return f.allRun(2) })
			if got := f.maxInFlight(t, "v1", "v2"); got > 2 {
				t.Fatalf("%d replacements in flight, max_parallel 2", got)
			}
			var sent, heard, took uint64
			for _, n := range f.nodes {
				st := n.agent.Status()
				sent, heard, took = sent+st.HandoffsSent, heard+st.HandoffsHeard, took+st.HandoffTakes
			}
			t.Logf("release hints sent %d, heard %d (a node's own included), takes on a hint %d", sent, heard, took)
			if !handoff {
				if sent != 0 || heard != 0 || took != 0 {
					t.Fatalf("control: a node at protocol %d is live, yet hints were sent %d, heard %d, taken on %d", rollout.AssignProtocol, sent, heard, took)
				}
				return
			}
			// Eight outdated allocations, two slots: after the first two
			// takes the slots are always held, and the queued waiters are
			// told of each release (a waiter told after it took on a
			// summary, or a hint lost to a race, takes nothing on it).
			if took == 0 || heard == 0 {
				t.Fatalf("no take was made on a release hint (sent %d, heard %d, taken %d)", sent, heard, took)
			}
		})
	}
}

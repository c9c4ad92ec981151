package agent

import (
	"testing"

	"github.com/hivelet/hivelet/host/fleet"
)

// A fleet's heartbeats make no pass and move no job's signature; a node
// record that changed otherwise (the control) does both.
func TestHeartbeatsMakeNoPassAndMoveNoSignature(t *testing.T) {
	for _, c := range []struct {
		name          string
		heartbeatOnly bool
	}{{"heartbeat only", true}, {"control: the record changed", false}} {
		t.Run(c.name, func(t *testing.T) {
			w := newEchoWorld()
			var e ownEchoes
			e.passed(w.view)
			var ix viewIndex
			ix.refresh(w, w.view, "self", 1, true)
			base := ix.baseSig()

			w.view.Generation++
			w.changes = append(w.changes, fleet.Change{Gen: w.view.Generation, Kind: fleet.KindNodes, Key: "n2", Revision: 4, HeartbeatOnly: c.heartbeatOnly})

			if got, _ := e.onlyEchoes(w); got != c.heartbeatOnly {
				t.Fatalf("onlyEchoes = %v, want %v", got, c.heartbeatOnly)
			}
			_, all := ix.refresh(w, w.view, "self", 1, false)
			if all == c.heartbeatOnly {
				t.Fatalf("every job dirty = %v", all)
			}
			if moved := ix.baseSig() != base; moved == c.heartbeatOnly {
				t.Fatalf("signature base moved = %v", moved)
			}
		})
	}
}

package fleet

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// A node record that changed in its heartbeat time alone is logged as such;
// any other change of it is not (controls: status, an attribute, a drain).
func TestAHeartbeatAloneIsMarkedHeartbeatOnly(t *testing.T) {
	s := NewSource(nil, SourceConfig{})
	log := slog.New(slog.DiscardHandler)
	nodes := bucketRef{kind: KindNodes, name: "nodes"}
	rev := uint64(0)
	put := func(n model.Node) Change {
		t.Helper()
		b, err := json.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		rev++
		g := s.View().Generation
		s.apply(nodes, wanted.Entry{Key: n.ID, Value: b, Revision: rev, Op: wanted.OpPut}, log)
		cs, ok := s.ChangesSince(g, s.View().Generation)
		if !ok || len(cs) != 1 {
			t.Fatalf("changes after a node put: %+v (complete %v)", cs, ok)
		}
		return cs[0]
	}
	t0 := time.Unix(1000, 0).UTC()
	n := model.Node{ID: "n1", Name: "n1", Datacenter: "dc1", NodePool: "default", Status: model.NodeStatusReady,
		Eligibility: model.Eligible, Attributes: map[string]string{"os": "linux"}, HeartbeatAt: t0}
	if c := put(n); c.HeartbeatOnly {
		t.Fatal("the first record of a node marked heartbeat-only")
	}
	n.HeartbeatAt = t0.Add(10 * time.Second)
	if c := put(n); !c.HeartbeatOnly {
		t.Fatal("a heartbeat not marked heartbeat-only")
	}
	controls := []func(n *model.Node){
		func(n *model.Node) { n.Status = model.NodeStatusDisconnected },
		func(n *model.Node) { n.Attributes = map[string]string{"os": "linux", "arch": "arm64"} },
		func(n *model.Node) { n.Drain = &model.DrainStrategy{} },
	}
	for i, f := range controls {
		m := n
		m.HeartbeatAt = n.HeartbeatAt.Add(time.Duration(i+1) * time.Second)
		f(&m)
		if c := put(m); c.HeartbeatOnly {
			t.Fatalf("control %d: a change beyond the heartbeat marked heartbeat-only", i)
		}
		put(n) // back
	}
}

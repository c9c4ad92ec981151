package fleet

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// benchNode is a node record of the size agents write (~0.9 KB): the host
// attributes, three drivers with their own attributes, a boot ID.
func benchNode(id string, at time.Time) []byte {
	n := model.Node{ID: id, Name: id, Datacenter: "dc1", NodePool: "default", Status: model.NodeStatusReady,
		Eligibility: model.Eligible, Attributes: map[string]string{}, Meta: map[string]string{"rack": "r1"},
		Drivers: map[string]model.DriverInfo{}, HeartbeatAt: at, RolloutProtocol: 1, BootID: "6f1c0e2a-5b7d-4c1e-9a3f-2d4b8e7c1a90"}
	for _, k := range []string{"kernel.name", "kernel.version", "os.name", "os.version", "cpu.arch", "cpu.numcores",
		"cpu.totalcompute", "memory.totalbytes", "unique.hostname", "unique.network.ip-address", "nomad.version", "hivelet.version"} {
		n.Attributes[k] = "value-of-" + k
	}
	for _, d := range []string{"docker", "exec", "mock"} {
		n.Drivers[d] = model.DriverInfo{Detected: true, Healthy: true, HealthDesc: "healthy",
			Attributes: map[string]string{"driver." + d + ".version": "1.0.0"}}
		n.Attributes["driver."+d] = "1"
		n.Attributes["driver."+d+".version"] = "1.0.0"
	}
	b, err := json.Marshal(n)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkApplyNodeHeartbeat is what every watcher of the nodes bucket
// pays per heartbeat of another node: applying a put of the same record with
// a new heartbeat time (the heartbeat fan-out of docs/scale.md). heartbeat
// is the path a source takes (heartbeatPut, no decode); decode forgets the
// bytes last accepted before each put, so the record is decoded in full, as
// every heartbeat was before: the ratio of the two is the saving.
func BenchmarkApplyNodeHeartbeat(b *testing.B) {
	for _, mode := range []string{"heartbeat", "decode"} {
		b.Run(mode, func(b *testing.B) {
			s := NewSource(&Store{}, SourceConfig{})
			ref := bucketRef{kind: KindNodes, name: "t_nodes"}
			log := slog.New(slog.DiscardHandler)
			t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			vals := make([][]byte, 64)
			for i := range vals {
				vals[i] = benchNode("node-1", t0.Add(time.Duration(i)*10*time.Second))
			}
			b.ReportMetric(float64(len(vals[0])), "record-bytes")
			rev := uint64(0)
			for i := 0; b.Loop(); i++ {
				if mode == "decode" {
					delete(s.nodeRaw, "node-1")
				}
				rev++
				s.apply(ref, wanted.Entry{Key: "node-1", Value: vals[i%len(vals)], Revision: rev, Op: wanted.OpPut, Time: t0.Add(time.Duration(rev) * time.Second)}, log)
			}
			st := s.nodes.At("node-1")
			if st.Value == nil || st.Revision != rev || !st.Value.HeartbeatAt.Equal(t0.Add(time.Duration((rev-1)%64)*10*time.Second)) {
				b.Fatalf("the record was not applied: %+v", st)
			}
		})
	}
}

// BenchmarkViewAfterOneChange is what a snapshot costs once one allocation
// record of a bucket of n changed: the agent takes one per pass, and a
// steward's pass follows every change of its job's allocations. The
// record's apply is part of each op; "apply only" times it alone, so the
// difference is the snapshot's.
func BenchmarkViewAfterOneChange(b *testing.B) {
	for _, n := range []int{500, 1000, 10000} {
		for _, mode := range []string{"view", "apply only"} {
			b.Run(fmt.Sprintf("allocs=%d/%s", n, mode), func(b *testing.B) {
				s := NewSource(nil, SourceConfig{})
				ref := bucketRef{kind: KindAllocs, name: "allocs"}
				log := slog.New(slog.DiscardHandler)
				val := func(i, version int) []byte {
					a := model.Allocation{ID: fmt.Sprintf("a%d", i), Namespace: "default", JobID: "web", NodeID: fmt.Sprintf("n%d", i),
						Name: "web.web[0]", ClientStatus: model.ClientRunning, JobVersion: uint64(version)}
					v, _ := json.Marshal(a)
					return v
				}
				key := func(i int) string {
					return wanted.AllocKey(fmt.Sprintf("n%d", i), "default", "web", fmt.Sprintf("a%d", i))
				}
				rev := uint64(0)
				for i := range n {
					rev++
					s.apply(ref, wanted.Entry{Key: key(i), Value: val(i, 0), Revision: rev, Op: wanted.OpPut}, log)
				}
				s.View()
				// 64 records, each written in turn with one of two versions.
				keys, vals := make([]string, 64), make([][2][]byte, 64)
				for j := range keys {
					i := j * 7 % n
					keys[j], vals[j] = key(i), [2][]byte{val(i, 1), val(i, 2)}
				}
				loopOverChanges(b, s, ref, rev, keys, vals, mode == "view")
			})
		}
	}
}

// BenchmarkViewAfterOneNodeChange is what a snapshot costs once one node
// record of a fleet of n changed in more than its heartbeat time (a
// registration, a drain, a status change): every agent takes one per
// pass after each, so a fleet's start-up makes n of them per agent.
// "apply only" times the record's apply alone.
func BenchmarkViewAfterOneNodeChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, mode := range []string{"view", "apply only"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, mode), func(b *testing.B) {
				s := NewSource(nil, SourceConfig{})
				ref := bucketRef{kind: KindNodes, name: "nodes"}
				log := slog.New(slog.DiscardHandler)
				t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
				val := func(i int, st model.NodeStatus) []byte {
					var node model.Node
					_ = json.Unmarshal(benchNode(fmt.Sprintf("n%05d", i), t0), &node)
					node.Status = st
					v, _ := json.Marshal(node)
					return v
				}
				rev := uint64(0)
				for i := range n {
					rev++
					s.apply(ref, wanted.Entry{Key: fmt.Sprintf("n%05d", i), Value: val(i, model.NodeStatusReady), Revision: rev, Op: wanted.OpPut}, log)
				}
				s.View()
				// 64 records, each flipped in turn between two statuses.
				keys, vals := make([]string, 64), make([][2][]byte, 64)
				for j := range keys {
					i := j * 7 % n
					keys[j], vals[j] = fmt.Sprintf("n%05d", i), [2][]byte{val(i, model.NodeStatusInitializing), val(i, model.NodeStatusReady)}
				}
				loopOverChanges(b, s, ref, rev, keys, vals, mode == "view")
			})
		}
	}
}

// loopOverChanges is the timed loop of the view benchmarks: each op puts
// one of keys with the next of its two values in turn, after revision rev,
// and takes a snapshot when view is set.
func loopOverChanges(b *testing.B, s *Source, ref bucketRef, rev uint64, keys []string, vals [][2][]byte, view bool) {
	log := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rev++
		j := i % len(keys)
		s.apply(ref, wanted.Entry{Key: keys[j], Value: vals[j][i/len(keys)%2], Revision: rev, Op: wanted.OpPut}, log)
		if view {
			s.View()
		}
	}
}

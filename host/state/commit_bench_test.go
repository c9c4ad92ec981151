package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// BenchmarkPutAllocAmong500 is one allocation record written (a bbolt
// commit and its fdatasync) into a store holding 500: what each status
// change of an allocation costs the node's state store. Run it with
// TMPDIR on tmpfs to weigh the commit without the disk.
func BenchmarkPutAllocAmong500(b *testing.B) {
	s, err := Open(b.TempDir(), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	job := &model.Job{ID: "web", Type: model.JobTypeSystem, Groups: []*model.Group{{Name: "g", Count: 1,
		Tasks: []*model.Task{{Name: "t", Driver: "mock"}}}}}
	recs := make([]*AllocRecord, 500)
	for i := range recs {
		recs[i] = &AllocRecord{Intent: model.DesiredRun, Job: job, Alloc: &model.Allocation{
			ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i*2654435761, i), Namespace: "default", JobID: "web",
			TaskGroup: "g", NodeID: "n1", Name: "web.g[0]", DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning}}
		if err := s.PutAlloc(recs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r := recs[(i*7919)%len(recs)]
		r.Alloc.ModifyTime = time.Unix(int64(i), 0)
		if err := s.PutAlloc(r); err != nil {
			b.Fatal(err)
		}
	}
}

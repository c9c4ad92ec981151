package state

import (
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// TestPutJobsStoresABurstInOneTransactionOrNothing: every record of a
// valid batch is read back; a batch with a record without a job ID stores
// none of its records (the control).
func TestPutJobsStoresABurstInOneTransactionOrNothing(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	job := func(id string, v uint64) *JobRecord {
		return &JobRecord{Job: &model.Job{ID: id, Type: model.JobTypeSystem, Version: v}, Revision: v + 10}
	}
	if err := s.PutJobs([]*JobRecord{job("web", 1), job("api", 2)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutJobs([]*JobRecord{job("db", 3), {Job: &model.Job{}}}); err == nil {
		t.Fatal("a record without a job ID was accepted")
	}
	got, err := s.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["default.web"].Revision != 11 || got["default.api"].Job.Version != 2 {
		t.Fatalf("stored jobs = %v, want web and api only", got)
	}
}

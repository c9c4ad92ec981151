package state

import (
	"encoding/json"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/hivelet/hivelet/host/model"
)

// Two namespaces' jobs of the same ID keep their own last good version; a
// record of the older layout (keyed by the job ID alone) is still read, loses
// to a newer record of the same job, and is removed by the job's next write.
func TestJobsOfTwoNamespacesWithOneIDKeepTheirOwnRecords(t *testing.T) {
	s, err := Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := &JobRecord{Job: &model.Job{ID: "web", Namespace: "team-a", Type: model.JobTypeSystem, Version: 1}, Revision: 5}
	b := &JobRecord{Job: &model.Job{ID: "web", Namespace: "team-b", Type: model.JobTypeSystem, Version: 7}, Revision: 6}
	if err := s.PutJobs([]*JobRecord{a, b}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["team-a.web"].Job.Version != 1 || got["team-b.web"].Job.Version != 7 {
		t.Fatalf("jobs: %+v", got)
	}

	// An older layout's record of the default namespace's "api", at an older
	// revision than the one written now.
	legacy, _ := json.Marshal(&JobRecord{Job: &model.Job{ID: "api", Type: model.JobTypeSystem, Version: 1}, Revision: 3})
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketJobs).Put([]byte("api"), legacy) }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Jobs(); got["default.api"] == nil || got["default.api"].Revision != 3 {
		t.Fatalf("the older layout's record is not read: %+v", got["default.api"])
	}
	if err := s.PutJob(&JobRecord{Job: &model.Job{ID: "api", Type: model.JobTypeSystem, Version: 2}, Revision: 8}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Jobs(); got["default.api"].Revision != 8 {
		t.Fatalf("the newer record lost to the older layout's: %+v", got["default.api"])
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketJobs).Get([]byte("api")) != nil {
			t.Error("the older layout's record was not removed by the job's write")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteJob("team-a", "web"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Jobs(); got["team-a.web"] != nil || got["team-b.web"] == nil {
		t.Fatalf("deleting team-a's web: %+v", got)
	}
}

package state

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hivelet/hivelet/host/jobspec"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/sdk/driver"
)

// webJob is examples/jobs/web.hcl as the agent holds it: a job with a
// template, a service and its check, durations and maps.
func webJob(t testing.TB) *model.Job {
	t.Helper()
	src, err := os.ReadFile("../../examples/jobs/web.hcl")
	if err != nil {
		t.Fatal(err)
	}
	j, err := jobspec.Parse("web.hcl", src)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// mockJob is the job of host/agent's KV-put-to-start benchmarks.
func mockJob() *model.Job {
	return &model.Job{ID: "j1", Type: model.JobTypeSystem, Datacenters: []string{"dc1"}, Groups: []*model.Group{{
		Name: "g", Count: 1,
		Update:  &model.UpdateStrategy{MaxParallel: 1, MinHealthyTime: model.Duration(100 * time.Millisecond), HealthyDeadline: model.Duration(5 * time.Second), ProgressDeadline: model.Duration(10 * time.Second)},
		Restart: &model.RestartPolicy{Attempts: 1, Interval: model.Duration(time.Minute), Delay: model.Duration(10 * time.Millisecond), Mode: model.RestartModeFail},
		Tasks:   []*model.Task{{Name: "t", Driver: "mock", KillTimeout: model.Duration(time.Second)}},
	}}}
}

// runningAlloc is an allocation as its runner writes it once its task
// runs and is healthy.
func runningAlloc(id string, j *model.Job) *model.Allocation {
	now := time.Date(2026, 12, 1, 12, 0, 0, 123456789, time.UTC)
	healthy := true
	return &model.Allocation{ID: id, Name: j.ID + ".g[0]", JobID: j.ID, JobVersion: j.Version, TaskGroup: "g", NodeID: "n1",
		DesiredStatus: model.DesiredRun, ClientStatus: model.ClientRunning, DeploymentID: "d1",
		DeploymentStatus: &model.AllocDeploymentStatus{Healthy: &healthy, Timestamp: now},
		States: []model.AllocState{
			{Field: model.AllocStateClientStatus, Value: string(model.ClientPending), Time: now},
			{Field: model.AllocStateClientStatus, Value: string(model.ClientRunning), Time: now.Add(time.Millisecond)},
		},
		TaskStates: map[string]*model.TaskState{"t": {State: "running", StartedAt: now, Events: []model.TaskEvent{
			{Type: "Received", Message: "task received by the node", Time: now},
			{Type: "Started", Message: "task started by the driver <&>", Time: now},
		}}},
		Ports:      []model.AllocatedPort{{Label: "http", Value: 8080, HostIP: "127.0.0.1"}},
		CreateTime: now, ModifyTime: now.Add(2 * time.Millisecond)}
}

// rawAlloc is the stored value of an allocation, as bbolt holds it.
func rawAlloc(t *testing.T, s *Store, id string) []byte {
	t.Helper()
	var b []byte
	if err := s.db.View(func(tx *bolt.Tx) error {
		b = append([]byte(nil), tx.Bucket(bucketAllocs).Get([]byte(id))...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// A record written with its job's encoding (what an allocation runner
// hands the store) is stored as the very document the whole record's
// encoding is: byte for byte, through PutAlloc and PutAllocAndHandle, so
// records written before the encoding was kept still load, and records
// written with it load in any agent that reads the old shape. Jobs whose
// strings the encoder escapes (<, >, &, U+2028) are among the cases.
func TestARecordWrittenWithItsJobsEncodingIsTheSameDocument(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	escaped := mockJob()
	escaped.ID = "esc<&>\u2028"
	escaped.Meta = map[string]string{"b": "<b>", "a": "x&y", "c": "\u2029"}
	escaped.Groups[0].Tasks[0].Config = map[string]any{"args": []any{"-a", 1.5, true, nil}, "nested": map[string]any{"z": 1, "a": "<"}}
	stopped := runningAlloc("x", mockJob())
	stopped.DesiredStatus, stopped.ClientStatus = model.DesiredStop, model.ClientComplete
	h := &driver.TaskHandle{Version: 1, TaskID: "t", Driver: "mock", DriverState: []byte(`{"pid":7}`)}
	for _, c := range []struct {
		name string
		job  *model.Job
		rec  func(id string, j *model.Job) *AllocRecord
	}{
		{"a running allocation of examples/jobs/web.hcl", webJob(t), func(id string, j *model.Job) *AllocRecord {
			return &AllocRecord{Alloc: runningAlloc(id, j), Intent: model.DesiredRun, Job: j}
		}},
		{"a job with escaped strings and a free-form config", escaped, func(id string, j *model.Job) *AllocRecord {
			return &AllocRecord{Alloc: runningAlloc(id, j), Intent: model.DesiredRun, Job: j}
		}},
		{"a stopped allocation, intent stop", mockJob(), func(id string, j *model.Job) *AllocRecord {
			a := *stopped
			a.ID = id
			return &AllocRecord{Alloc: &a, Intent: model.DesiredStop, Job: j}
		}},
		{"a pending allocation of a bare job", &model.Job{ID: "bare", Type: model.JobTypeSystem}, func(id string, j *model.Job) *AllocRecord {
			return &AllocRecord{Alloc: &model.Allocation{ID: id, DesiredStatus: model.DesiredRun, ClientStatus: model.ClientPending}, Intent: model.DesiredRun, Job: j}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := json.Marshal(c.rec("a", c.job))
			if err != nil {
				t.Fatal(err)
			}
			e, err := s.EncodeJob(c.job)
			if err != nil {
				t.Fatal(err)
			}
			withEnc := func(id string) *AllocRecord {
				r := c.rec(id, c.job)
				r.JobEncoding = e
				return r
			}
			got, err := encodeAllocRecord(withEnc("a"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoded with the job's encoding:\n%s\nwhole:\n%s", got, want)
			}
			// Through the store: the old path (no encoding) and both new ones.
			if err := s.PutAlloc(c.rec("old", c.job)); err != nil {
				t.Fatal(err)
			}
			if err := s.PutAlloc(withEnc("put")); err != nil {
				t.Fatal(err)
			}
			if err := s.PutAllocAndHandle(withEnc("handle"), "t", h); err != nil {
				t.Fatal(err)
			}
			old, ok, err := s.Alloc("old")
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			for _, id := range []string{"put", "handle"} {
				want, _ := json.Marshal(c.rec(id, c.job))
				if raw := rawAlloc(t, s, id); !bytes.Equal(raw, want) {
					t.Fatalf("%s stored:\n%s\nwant:\n%s", id, raw, want)
				}
				r, ok, err := s.Alloc(id)
				if err != nil || !ok {
					t.Fatal(ok, err)
				}
				r.Alloc.ID = "old"
				if !reflect.DeepEqual(r, old) {
					t.Fatalf("%s reads back as %+v, the old path's as %+v", id, r, old)
				}
			}
			if _, err := s.Allocs(); err != nil { // the restore's checks, readsBack included
				t.Fatal(err)
			}
		})
	}
}

// The encoding is written only for the job it was made from: a record
// whose job is another (a runner's job replaced, a record copied) is
// written with its own job, even one equal to the encoded job. The control,
// an encoding of the record's own job with bytes of its own, shows the
// encoding's bytes are what is written when it applies.
func TestAJobEncodingIsWrittenOnlyForTheJobItWasMadeFrom(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v1, v2 := mockJob(), mockJob()
	v1.Version, v2.Version = 1, 2
	marked := func(j *model.Job) *JobEncoding {
		return &JobEncoding{job: j, data: []byte(`{"id":"from-the-encoding","type":"system","version":9,"groups":null}`)}
	}
	for _, c := range []struct {
		name        string
		job         *model.Job
		enc         *JobEncoding
		wantID      string
		wantVersion uint64
	}{
		{"the encoding of another job", v2, marked(v1), "j1", 2},
		{"the encoding of an equal job (another pointer)", v1, marked(mockJob()), "j1", 1},
		{"a zero encoding", v1, &JobEncoding{}, "j1", 1},
		{"no job", nil, &JobEncoding{}, "", 0},
		{"control: the encoding of the record's job", v2, marked(v2), "from-the-encoding", 9},
	} {
		r := &AllocRecord{Alloc: runningAlloc("a", mockJob()), Intent: model.DesiredRun, Job: c.job, JobEncoding: c.enc}
		if err := s.PutAlloc(r); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, _, err := s.Alloc("a")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.job == nil {
			if got.Job != nil {
				t.Fatalf("%s: stored job %+v", c.name, got.Job)
			}
			continue
		}
		if got.Job.ID != c.wantID || got.Job.Version != c.wantVersion {
			t.Fatalf("%s: stored job %s version %d, want %s version %d", c.name, got.Job.ID, got.Job.Version, c.wantID, c.wantVersion)
		}
	}
}

// The runners of one job share one encoding of it; another job (even an
// equal one, or the same job's next version) has its own, and an equal
// one shares its bytes. The store keeps only the last jobEncodingsKept:
// past them, a job is encoded again.
func TestEncodeJobSharesOneEncodingPerJobAndKeepsOnlyTheLastFew(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j := mockJob()
	e1, err := s.EncodeJob(j)
	if err != nil {
		t.Fatal(err)
	}
	if e2, _ := s.EncodeJob(j); e2 != e1 {
		t.Fatal("a second caller of the same job got another encoding")
	}
	if e1.Job() != j {
		t.Fatal("the encoding is not of its job")
	}
	want, _ := json.Marshal(j)
	if !bytes.Equal(e1.data, want) {
		t.Fatalf("encoding %s, want %s", e1.data, want)
	}
	// An equal job (another pointer, as each restored allocation holds its
	// own decoded copy of its job) has its own encoding, on the same bytes.
	other, _ := s.EncodeJob(mockJob())
	if other == e1 || other.Job() == j {
		t.Fatal("an equal job (another pointer) got the first job's encoding")
	}
	if &other.data[0] != &e1.data[0] {
		t.Fatal("an equal job's encoding holds a copy of its bytes of its own")
	}
	v2 := mockJob()
	v2.Version = 2
	if e, _ := s.EncodeJob(v2); &e.data[0] == &e1.data[0] || bytes.Equal(e.data, e1.data) {
		t.Fatal("the next version of the job got the first one's bytes")
	}
	for range jobEncodingsKept {
		if _, err := s.EncodeJob(mockJob()); err != nil {
			t.Fatal(err)
		}
	}
	e3, _ := s.EncodeJob(j)
	if e3 == e1 || !bytes.Equal(e3.data, want) {
		t.Fatalf("past %d other jobs: the same encoding kept (%v), or another document %s", jobEncodingsKept, e3 == e1, e3.data)
	}
	if _, err := s.EncodeJob(nil); err == nil {
		t.Fatal("no job encoded")
	}
}

// encodeAllocRecord writes allocRecordHead and then the job: that is the
// whole record only while allocRecordHead has every stored member of
// AllocRecord but the job, in order, named and typed the same, and the job
// is the last. A member added to AllocRecord and not to allocRecordHead
// fails here.
func TestAllocRecordHeadIsTheRecordWithoutItsJob(t *testing.T) {
	type member struct {
		name, tag string
		typ       reflect.Type
	}
	stored := func(t reflect.Type) []member {
		var out []member
		for i := range t.NumField() {
			f := t.Field(i)
			if tag := f.Tag.Get("json"); tag != "-" {
				out = append(out, member{f.Name, tag, f.Type})
			}
		}
		return out
	}
	rec, head := stored(reflect.TypeFor[AllocRecord]()), stored(reflect.TypeFor[allocRecordHead]())
	job := member{"Job", "job", reflect.TypeFor[*model.Job]()}
	if want := append(head, job); !reflect.DeepEqual(rec, want) {
		t.Fatalf("AllocRecord stores %v; allocRecordHead and the job are %v", rec, want)
	}
}

// BenchmarkAllocRecordEncode is the encoding of one record as a runner
// writes it (outside the store's transaction): whole, as before the job's
// encoding was kept, and with it.
func BenchmarkAllocRecordEncode(b *testing.B) {
	s, err := Open(b.TempDir(), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, j := range []struct {
		name string
		job  *model.Job
	}{{"mock", mockJob()}, {"web", webJob(b)}} {
		e, err := s.EncodeJob(j.job)
		if err != nil {
			b.Fatal(err)
		}
		r := &AllocRecord{Alloc: runningAlloc("a", j.job), Intent: model.DesiredRun, Job: j.job}
		b.Run(j.name+"/whole", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(r); err != nil {
					b.Fatal(err)
				}
			}
		})
		withEnc := *r
		withEnc.JobEncoding = e
		b.Run(j.name+"/job-encoded", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encodeAllocRecord(&withEnc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

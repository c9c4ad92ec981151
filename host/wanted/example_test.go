package wanted_test

import (
	"fmt"

	"github.com/hivelet/hivelet/host/wanted"
)

// A job's key is purged: its allocations keep running, reported orphaned.
// Only a decoded stop = true stops them.
func ExampleOrderFor() {
	job := []byte(`{"id":"web","type":"system","version":1,"groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"mock"}]}]}`)
	var st wanted.JobState
	st, _ = wanted.ApplyJob(st, wanted.Entry{Key: "default.web", Value: job, Revision: 1})
	fmt.Println(wanted.OrderFor(st))

	st, _ = wanted.ApplyJob(st, wanted.Entry{Key: "default.web", Revision: 2, Op: wanted.OpPurge})
	fmt.Println(wanted.OrderFor(st), wanted.IsDeletionOrder(st))

	stop := []byte(`{"id":"web","type":"system","version":2,"stop":true,"groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"mock"}]}]}`)
	st, _ = wanted.ApplyJob(st, wanted.Entry{Key: "default.web", Value: stop, Revision: 3})
	fmt.Println(wanted.OrderFor(st), wanted.IsDeletionOrder(st))
	// Output:
	// run
	// keep-orphaned false
	// stop true
}

// An unknown field rejects the whole declaration; version 1 stays in force.
func ExampleApplyJob_rejection() {
	var st wanted.JobState
	st, _ = wanted.ApplyJob(st, wanted.Entry{Key: "default.web", Revision: 1,
		Value: []byte(`{"id":"web","type":"system","version":1,"groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"mock"}]}]}`)})
	st, eff := wanted.ApplyJob(st, wanted.Entry{Key: "default.web", Revision: 2,
		Value: []byte(`{"id":"web","type":"system","version":2,"groups":[{"name":"g","count":1,"tasks":[{"name":"t","driver":"mock"}]}],"replicas":3}`)})
	fmt.Println(eff, st.Value.Version, st.Rejection.Reason)
	// Output:
	// rejected 1 decoding job: unknown field "replicas"
}

package fleet

import (
	"slices"
	"testing"

	"github.com/hivelet/hivelet/host/wanted"
)

func TestRejectionsListsEveryBucketsRejectionsInForceSorted(t *testing.T) {
	rej := func(bucket, key string) *wanted.Rejection {
		return &wanted.Rejection{Bucket: bucket, Key: key, Revision: 7, Reason: "bad json"}
	}
	v := &View{
		Jobs: MapOf(map[string]wanted.JobState{
			"web": {Key: "web", Rejection: rej("jobs", "web")},
			"api": {Key: "api"}, // control: a record without a rejection is not listed
		}),
		Nodes:       MapOf(map[string]wanted.NodeState{"n1": {Key: "n1", Rejection: rej("nodes", "n1")}}),
		Intents:     MapOf(map[string]wanted.IntentState{"n1": {Key: "n1", Rejection: rej("intents", "n1")}}),
		Allocs:      MapOf(map[string]wanted.AllocState{"n1.a": {Key: "n1.a", Rejection: rej("allocs", "n1.a")}}),
		Deployments: MapOf(map[string]wanted.DeploymentState{"d": {Key: "d", Rejection: rej("deployments", "d")}}),
		Slots: MapOf(map[string]wanted.SlotState{
			"s2": {Key: "s2", Rejection: rej("rollout", "s2")},
			"s1": {Key: "s1", Rejection: rej("rollout", "s1")},
		}),
	}
	var got []string
	for _, r := range v.Rejections() {
		got = append(got, r.Bucket+"/"+r.Key)
	}
	want := []string{"allocs/n1.a", "deployments/d", "intents/n1", "jobs/web", "nodes/n1", "rollout/s1", "rollout/s2"}
	if !slices.Equal(got, want) {
		t.Fatalf("rejections %v, want %v", got, want)
	}
}

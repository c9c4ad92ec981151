package fleet

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// The decoders are fuzzed in host/wanted (FuzzDecodeJobVersion); this is the
// store's side of what that fuzzing found: a recorded job version is read
// through wanted.DecodeJobVersion, so a value put under a version's key that
// holds another version, or another job, is refused and never becomes the
// spec a revert writes back. Control: the version recorded by PutJobVersion
// reads back.
func TestAJobVersionStoredUnderAnotherVersionsKeyIsRefused(t *testing.T) {
	srv := startServer(t, t.TempDir(), -1)
	log, _ := testLog(t)
	st := mustEnsure(t, connect(t, srv.ClientURL(), log, nil), BucketOptions{})
	ctx := context.Background()
	mk := func(id string, version uint64) *model.Job {
		return &model.Job{ID: id, Type: model.JobTypeSystem, Version: version,
			Groups: []*model.Group{{Name: "g", Count: 1, Tasks: []*model.Task{{Name: "t", Driver: "mock"}}}}}
	}
	if err := st.PutJobVersion(ctx, mk("web", 1)); err != nil {
		t.Fatal(err)
	}
	if j, err := st.GetJobVersion(ctx, "", "web", 1); err != nil || j.ID != "web" || j.Version != 1 {
		t.Fatalf("control: the recorded version reads back as %+v, %v", j, err)
	}
	for _, forged := range []*model.Job{mk("web", 3), mk("other", 2)} {
		b, err := json.Marshal(forged)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.JobVersions.Put(ctx, wanted.JobVersionKey("", "web", 2), b); err != nil {
			t.Fatal(err)
		}
		j, err := st.GetJobVersion(ctx, "", "web", 2)
		if err == nil || !strings.Contains(err.Error(), "belongs under key") {
			t.Fatalf("version %d of job %s under the key of version 2 of web read as %+v, %v", forged.Version, forged.ID, j, err)
		}
	}
}

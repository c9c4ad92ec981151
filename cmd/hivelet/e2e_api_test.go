package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

func apiPost(t *testing.T, url, ctype, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, ctype, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEndToEndAJobIsRunAndStoppedOverTheHTTPAPI: on the dev agent, a job
// file POSTed to /v1/jobs is validated like job run (a misspelt config
// key is a 400 with its position, nothing written), written as version 0,
// placed and running; the same file again writes nothing; a stop over the
// API stops its allocation.
func TestEndToEndAJobIsRunAndStoppedOverTheHTTPAPI(t *testing.T) {
	p := newAgent(t, "")
	p.start()
	base := "http://" + p.apiAddr
	bad := strings.Replace(mockJobHCL("over http", ""), "stdout_string", "stdout_strnig", 1)
	code, body := apiPost(t, base+"/v1/jobs", "text/plain", bad)
	if code != 400 || !strings.Contains(body, "request.hcl:") || !strings.Contains(body, `did you mean \"stdout_string\"?`) {
		t.Fatalf("a bad job file: %d %s", code, body)
	}
	if code, out := p.cli("job", "status", "web"); code != 2 {
		t.Fatalf("the refused job was written: exit %d\n%s", code, out)
	}
	var res struct {
		Version uint64 `json:"version"`
		Written bool   `json:"written"`
	}
	code, body = apiPost(t, base+"/v1/jobs", "text/plain", mockJobHCL("over http", ""))
	if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.Version != 0 || !res.Written {
		t.Fatalf("job write: %d %s", code, body)
	}
	testutil.Eventually(t, 20*time.Second, "the job's allocation running", func() bool {
		live := liveOf(p.allocs(), "web")
		return len(live) == 1 && live[0].ClientStatus == model.ClientRunning
	})
	code, body = apiPost(t, base+"/v1/jobs", "text/plain", mockJobHCL("over http", ""))
	if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.Written {
		t.Fatalf("the same file again: %d %s", code, body)
	}
	if code, body := apiPost(t, base+"/v1/job/web/stop", "", ""); code != 200 || !strings.Contains(body, `"written": true`) {
		t.Fatalf("stop: %d %s", code, body)
	}
	testutil.Eventually(t, 20*time.Second, "no allocation of the job running", func() bool { return len(liveOf(p.allocs(), "web")) == 0 })
}

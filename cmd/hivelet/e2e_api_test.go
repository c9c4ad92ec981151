package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/api"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
)

// apiPost posts body to url with the bearer token ("" sends none).
func apiPost(t *testing.T, url, ctype, body, token string) (int, string) {
	t.Helper()
	return apiRequest(t, "POST", url, ctype, strings.NewReader(body), token)
}

// apiGet gets url with the bearer token ("" sends none).
func apiGet(t *testing.T, url, token string) (int, string) {
	t.Helper()
	return apiRequest(t, "GET", url, "", nil, token)
}

func apiRequest(t *testing.T, method, url, ctype string, body io.Reader, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// apiToken is the HTTP API token the agent generated in its state directory.
func (p *agentProc) apiToken() string {
	p.t.Helper()
	tok, err := fleet.ReadToken(filepath.Join(p.dir, "state", api.TokenFile))
	if err != nil {
		p.t.Fatal(err)
	}
	return tok
}

// TestEndToEndAJobIsRunAndStoppedOverTheHTTPAPI: on an agent, a job file
// POSTed to /v1/jobs without the API token (or with another) is refused
// with 401 and nothing is written, while a read needs none; with the token
// (0600 in the state directory) it is validated like job run (a misspelt
// config key is a 400 with its position, nothing written), written as
// version 0, placed and running; the same file again writes nothing; a
// stop without the token is refused, with it stops its allocation.
func TestEndToEndAJobIsRunAndStoppedOverTheHTTPAPI(t *testing.T) {
	// Parallel: an agent of its own (embedded NATS, ports, directories),
	// no Docker, no job ports.
	t.Parallel()
	p := newAgent(t, "")
	p.start()
	base := "http://" + p.apiAddr
	for _, tok := range []string{"", "not-the-token"} {
		if code, body := apiPost(t, base+"/v1/jobs", "text/plain", mockJobHCL("over http", ""), tok); code != 401 || !strings.Contains(body, api.TokenFile) {
			t.Fatalf("a write with token %q: %d %s, want 401 naming the token file", tok, code, body)
		}
	}
	if code, out := p.cli("job", "status", "web"); code != 2 {
		t.Fatalf("the unauthorised write was written: exit %d\n%s", code, out)
	}
	if fi, err := os.Stat(filepath.Join(p.dir, "state", api.TokenFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the API token file: %v %v, want mode 0600", fi, err)
	}
	token := p.apiToken()
	// The profiles are served only with http.enable_debug, which this
	// agent's configuration does not set.
	if code, body := apiGet(t, base+"/debug/pprof/", token); code != 404 {
		t.Fatalf("/debug/pprof/ without http.enable_debug: %d %.200s, want 404", code, body)
	}
	bad := strings.Replace(mockJobHCL("over http", ""), "stdout_string", "stdout_strnig", 1)
	code, body := apiPost(t, base+"/v1/jobs", "text/plain", bad, token)
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
	code, body = apiPost(t, base+"/v1/jobs", "text/plain", mockJobHCL("over http", ""), token)
	if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.Version != 0 || !res.Written {
		t.Fatalf("job write: %d %s", code, body)
	}
	testutil.Eventually(t, 20*time.Second, "the job's allocation running", func() bool {
		live := liveOf(p.allocs(), "web")
		return len(live) == 1 && live[0].ClientStatus == model.ClientRunning
	})
	code, body = apiPost(t, base+"/v1/jobs", "text/plain", mockJobHCL("over http", ""), token)
	if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.Written {
		t.Fatalf("the same file again: %d %s", code, body)
	}
	if code, _ := apiPost(t, base+"/v1/job/web/stop", "", "", ""); code != 401 {
		t.Fatalf("a stop without the token: %d, want 401", code)
	}
	if code, body := apiPost(t, base+"/v1/job/web/stop", "", "", token); code != 200 || !strings.Contains(body, `"written": true`) {
		t.Fatalf("stop: %d %s", code, body)
	}
	testutil.Eventually(t, 20*time.Second, "no allocation of the job running", func() bool { return len(liveOf(p.allocs(), "web")) == 0 })
}

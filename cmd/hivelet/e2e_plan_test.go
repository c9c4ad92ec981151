package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestEndToEndJobPlanShowsTheDiffAndEachNodesDecision: on the dev agent
// running version 0 of a job, plan of a changed file shows the changed
// config and a destructive update on the node, with -json; plan of a
// change of the update block only is an in-place update; plan of the same
// file is no change; and nothing is written (the job stays at version 0).
// The exit codes are Nomad's: 1 for the update (an allocation replaced), 0
// for the in-place update and for no change, 255 for a file that does not
// parse, 2 for a usage mistake.
// The agent's per-job and per-deployment metrics agree with job status.
func TestEndToEndJobPlanShowsTheDiffAndEachNodesDecision(t *testing.T) {
	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()
	v0 := e2eFile(t, dir, "v0.hcl", mockJobHCL("v0", ""))
	if code, out := p.cli("job", "run", v0); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	changed := e2eFile(t, dir, "v1.hcl", mockJobHCL("v1", ""))
	code, out := p.cli("job", "plan", changed)
	if code != 1 || !strings.Contains(out, "version 0 in force; `job run` would write version 1") ||
		!strings.Contains(out, `~ groups[g].tasks[t].config.stdout_string: "v0" => "v1"`) ||
		!strings.Contains(out, "(no class): 1 node(s): update 1") {
		t.Fatalf("job plan of a changed file: exit %d\n%s", code, out)
	}
	code, out = p.cli("job", "plan", "-json", changed)
	var plan struct {
		Version uint64 `json:"version"`
		Changed bool   `json:"changed"`
		Nodes   []struct {
			Entries []struct {
				Action string `json:"action"`
			} `json:"entries"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &plan); code != 1 || err != nil {
		t.Fatalf("job plan -json: exit %d, %v\n%s", code, err, out)
	}
	if !plan.Changed || plan.Version != 1 || len(plan.Nodes) != 1 || len(plan.Nodes[0].Entries) != 1 || plan.Nodes[0].Entries[0].Action != "update" {
		t.Fatalf("job plan -json: %+v", plan)
	}
	inPlace := e2eFile(t, dir, "v1b.hcl", strings.Replace(mockJobHCL("v0", ""), `healthy_deadline = "20s"`, `healthy_deadline = "25s"`, 1))
	if code, out := p.cli("job", "plan", inPlace); code != 0 || !strings.Contains(out, "in-place 1") ||
		!strings.Contains(out, `~ groups[g].update.healthy_deadline`) {
		t.Fatalf("job plan of an update-block change: exit %d\n%s", code, out)
	}
	if code, out := p.cli("job", "plan", v0); code != 0 || !strings.Contains(out, "no change against version 0") || !strings.Contains(out, "ignore 1") {
		t.Fatalf("job plan of the running file: exit %d\n%s", code, out)
	}
	broken := e2eFile(t, dir, "broken.hcl", "job \"web\" {\n  type = \n}\n")
	if code, out := p.cli("job", "plan", broken); code != 255 || !strings.Contains(out, "broken.hcl:2:") {
		t.Fatalf("job plan of a file that does not parse: exit %d, want 255 and the position\n%s", code, out)
	}
	if code, out := p.cli("job", "plan"); code != 2 || !strings.Contains(out, "usage: hivelet job plan FILE") {
		t.Fatalf("job plan without a file: exit %d, want 2 and the usage line\n%s", code, out)
	}
	if code, out := p.cli("job", "status", "web"); code != 0 || !strings.Contains(out, "Version    = 0") {
		t.Fatalf("after the plans the job is no longer at version 0: exit %d\n%s", code, out)
	}
	// The per-job and per-deployment metrics say the same as job status,
	// and so does the node's allocations gauge (counted when scraped).
	resp, err := http.Get("http://" + p.apiAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`hivelet_job_allocations{job="web",namespace="default",status="running"} 1`,
		`hivelet_deployment_status{job="web",namespace="default",status="successful",version="0"} 1`,
		`hivelet_deployment_allocations{health="healthy",job="web",namespace="default",version="0"} 1`,
		`hivelet_allocations{status="running"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, out := p.cli("job", "stop", "web"); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}

package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/sdk/driver"
)

type memWriter struct {
	jobs map[string]*model.Job
}

func (m *memWriter) RunJob(_ context.Context, j *model.Job) (uint64, bool, error) {
	if cur := m.jobs[j.ID]; cur != nil {
		if model.SameSpec(cur, j) {
			return cur.Version, false, nil
		}
		j.Version = cur.Version + 1
	}
	m.jobs[j.ID] = j
	return j.Version, true, nil
}

func (m *memWriter) StopJob(_ context.Context, _, id string) (uint64, bool, error) {
	cur := m.jobs[id]
	if cur == nil {
		return 0, false, fmt.Errorf("%w: no job %q", ErrUnknown, id)
	}
	if cur.Stop {
		return cur.Version, false, nil
	}
	c := *cur
	c.Stop, c.Version = true, cur.Version+1
	m.jobs[id] = &c
	return c.Version, true, nil
}

const apiJobHCL = `variable "image" {
  type    = string
  default = "web:1"
}
job "web" {
  type = "system"
  group "g" {
    task "t" {
      driver = "mock"
      config {
        image = var.image
      }
    }
  }
}
`

// TestJobsAreWrittenOverHTTPWithTheCLIsValidation: an HCL job with a
// variable from the query is parsed, validated against the drivers'
// schemas and written (version 0, then 1 for a changed variable, nothing
// for the same); a config the driver's schema refuses is a 400 listing the
// problem at its position, and nothing is written; a stop writes the stop
// once; an unknown job is a 404; without a writer the routes answer 404.
func TestJobsAreWrittenOverHTTPWithTheCLIsValidation(t *testing.T) {
	mw := &memWriter{jobs: map[string]*model.Job{}}
	schemas := map[string]*driver.Schema{"mock": {Fields: map[string]*driver.Field{"image": {Type: driver.TypeString}}}}
	h := NewHandler(Providers{JobWrites: &JobWrites{Writer: mw, Drivers: schemas}}, nil)
	do := func(path, ctype, body string) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	var res JobWriteResult
	for i, c := range []struct {
		path    string
		version uint64
		written bool
		image   string
	}{
		{"/v1/jobs", 0, true, "web:1"},
		{"/v1/jobs?var=image=web:2", 1, true, "web:2"},
		{"/v1/jobs?var=image=web:2", 1, false, "web:2"},
	} {
		code, body := do(c.path, "", apiJobHCL)
		if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.Version != c.version || res.Written != c.written || res.JobID != "web" {
			t.Fatalf("write %d: %d %s", i, code, body)
		}
		if got := mw.jobs["web"].Groups[0].Tasks[0].Config["image"]; got != c.image {
			t.Fatalf("write %d: image %v, want %s", i, got, c.image)
		}
	}
	code, body := do("/v1/jobs", "", strings.Replace(apiJobHCL, "image = var.image", "imag = var.image", 1))
	var perr JobParseError
	if err := json.Unmarshal([]byte(body), &perr); code != 400 || err != nil || len(perr.Errors) != 1 ||
		!strings.Contains(perr.Errors[0], "request.hcl:") || !strings.Contains(perr.Errors[0], `did you mean "image"?`) {
		t.Fatalf("a bad config: %d %s", code, body)
	}
	if mw.jobs["web"].Version != 1 {
		t.Fatalf("a refused job was written: %+v", mw.jobs["web"])
	}
	jsonJob := `{"id": "api", "type": "system", "groups": [{"name": "g", "count": 1, "tasks": [{"name": "t", "driver": "mock"}]}]}`
	if code, body := do("/v1/jobs", "application/json", jsonJob); code != 200 || !strings.Contains(body, `"job_id": "api"`) {
		t.Fatalf("a JSON job: %d %s", code, body)
	}
	if code, body := do("/v1/jobs?format=yaml", "", jsonJob); code != 400 || !strings.Contains(body, "want hcl or json") {
		t.Fatalf("an unknown format: %d %s", code, body)
	}
	if code, body := do("/v1/job/web/stop", "", ""); code != 200 || !strings.Contains(body, `"version": 2`) || !strings.Contains(body, `"written": true`) {
		t.Fatalf("stop: %d %s", code, body)
	}
	if code, body := do("/v1/job/web/stop", "", ""); code != 200 || !strings.Contains(body, `"written": false`) {
		t.Fatalf("a second stop: %d %s", code, body)
	}
	if code, body := do("/v1/job/nope/stop", "", ""); code != 404 {
		t.Fatalf("stop of an unknown job: %d %s", code, body)
	}
	bare := NewHandler(Providers{}, nil)
	rec := httptest.NewRecorder()
	bare.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/jobs", strings.NewReader(apiJobHCL)))
	if rec.Code != 404 {
		t.Fatalf("without a writer: %d", rec.Code)
	}
}

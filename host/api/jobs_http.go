package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/hivelet/hivelet/host/jobspec"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/sdk/driver"
)

// JobWriter writes jobs the way the CLI does: RunJob as `hivelet job run`
// (version 0 when new, the current one + 1 when the spec changed, nothing
// when it did not, by compare-and-set, recorded for revert), StopJob as
// `hivelet job stop` (a new version with stop = true, unless already
// stopped). An unknown job is an error wrapping ErrUnknown.
type JobWriter interface {
	RunJob(ctx context.Context, job *model.Job) (version uint64, written bool, err error)
	StopJob(ctx context.Context, namespace, id string) (version uint64, written bool, err error)
}

// JobWrites serves POST /v1/jobs and POST /v1/job/{job}/stop. A job is
// parsed and validated as `hivelet job run` does, against Drivers (the
// built-in drivers' schemas), but never reads the agent's environment:
// variables come from the request only.
type JobWrites struct {
	Writer  JobWriter
	Drivers map[string]*driver.Schema
}

// maxJobBody bounds a job file sent to POST /v1/jobs.
const maxJobBody = 1 << 20

// JobWriteResult is the answer of a job write.
type JobWriteResult struct {
	JobID     string `json:"job_id"`
	Namespace string `json:"namespace,omitempty"`
	Version   uint64 `json:"version"`
	// Written is false when nothing needed writing (the same spec, or a
	// job already stopped).
	Written  bool     `json:"written"`
	Warnings []string `json:"warnings"`
}

// JobParseError is the 400 answer of a job file that does not validate:
// every problem, each with its position, as `job validate` prints them.
type JobParseError struct {
	Error  string   `json:"error"`
	Errors []string `json:"errors"`
}

func serveJobWrites(mux *http.ServeMux, jw *JobWrites) {
	unavailable := func(w http.ResponseWriter) bool {
		if jw == nil || jw.Writer == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "job writes not available"})
			return true
		}
		return false
	}
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		if unavailable(w) {
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxJobBody+1))
		if err != nil {
			writeErr(w, fmt.Errorf("%w: reading the body: %v", ErrBadInput, err))
			return
		}
		if len(body) > maxJobBody {
			writeErr(w, fmt.Errorf("%w: a job file is at most %d bytes", ErrBadInput, maxJobBody))
			return
		}
		name, err := jobFileName(r)
		if err != nil {
			writeErr(w, err)
			return
		}
		res := JobWriteResult{Warnings: []string{}}
		in := jobspec.Inputs{Vars: r.URL.Query()["var"], Drivers: jw.Drivers,
			Warn: func(e *jobspec.Error) { res.Warnings = append(res.Warnings, e.Error()) }}
		job, err := jobspec.ParseWith(name, body, in)
		if err != nil {
			var errs jobspec.Errors
			out := JobParseError{Error: err.Error()}
			if errors.As(err, &errs) {
				out.Error = fmt.Sprintf("%s: %d problem(s) found", name, len(errs))
				for _, e := range errs {
					out.Errors = append(out.Errors, e.Error())
				}
			}
			writeJSON(w, http.StatusBadRequest, out)
			return
		}
		if ns := r.URL.Query().Get("namespace"); ns != "" {
			job.Namespace = ns
		}
		v, written, err := jw.Writer.RunJob(r.Context(), job)
		if err != nil {
			writeErr(w, err)
			return
		}
		res.JobID, res.Namespace, res.Version, res.Written = job.ID, job.Namespace, v, written
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("POST /v1/job/{job}/stop", func(w http.ResponseWriter, r *http.Request) {
		if unavailable(w) {
			return
		}
		ns, id := r.URL.Query().Get("namespace"), r.PathValue("job")
		v, written, err := jw.Writer.StopJob(r.Context(), ns, id)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, JobWriteResult{JobID: id, Namespace: ns, Version: v, Written: written, Warnings: []string{}})
	})
}

// jobFileName is the name the request's job file is parsed under, which
// decides its form: ?format=hcl|json, else a JSON Content-Type, else HCL.
func jobFileName(r *http.Request) (string, error) {
	switch f := strings.ToLower(r.URL.Query().Get("format")); f {
	case "hcl", "nomad":
		return "request.hcl", nil
	case "json":
		return "request.json", nil
	case "":
	default:
		return "", fmt.Errorf("%w: format %q: want hcl or json", ErrBadInput, f)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "application/json" {
		return "request.json", nil
	}
	return "request.hcl", nil
}

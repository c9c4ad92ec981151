package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/rollout"
)

// ActionResult is the answer of a rollout action: the record (or job) as
// stored after it, and whether the action wrote anything.
type ActionResult struct {
	Deployment *model.Deployment `json:"deployment,omitempty"`
	Job        *model.Job        `json:"job,omitempty"`
	Changed    bool              `json:"changed"`
}

// PromoteRequest is the optional body of POST /v1/deployment/{job}/promote.
type PromoteRequest struct {
	Groups []string `json:"groups,omitempty"`
}

// StatusOf is the HTTP status of an operator action's error: 404 unknown
// job, version or deployment; 400 bad input; 409 refused by the protocol
// (a terminal record, unhealthy canaries); 500 anything else.
func StatusOf(err error) int {
	switch {
	case errors.Is(err, ErrUnknown):
		return http.StatusNotFound
	case errors.Is(err, ErrBadInput):
		return http.StatusBadRequest
	case errors.Is(err, rollout.ErrRefused):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func writeErr(w http.ResponseWriter, err error) {
	writeJSON(w, StatusOf(err), map[string]string{"error": err.Error()})
}

// serveRollout adds the rollout actions: POST
// /v1/deployment/{job}/promote|fail|pause|resume (the job's newest
// deployment; ?namespace=, promote also ?group= or {"groups": [...]}) and
// POST /v1/job/{job}/revert/{version}.
func serveRollout(mux *http.ServeMux, op *Operator) {
	action := func(name string, do func(r *http.Request, d *model.Deployment) (*model.Deployment, bool, error)) {
		mux.HandleFunc("POST /v1/deployment/{job}/"+name, func(w http.ResponseWriter, r *http.Request) {
			if op == nil {
				writeJSON(w, http.StatusNotFound, map[string]string{"error": "rollout actions not available"})
				return
			}
			d, err := op.Latest(r.URL.Query().Get("namespace"), r.PathValue("job"))
			if err != nil {
				writeErr(w, err)
				return
			}
			nd, changed, err := do(r, d)
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, ActionResult{Deployment: nd, Changed: changed})
		})
	}
	action("promote", func(r *http.Request, d *model.Deployment) (*model.Deployment, bool, error) {
		groups := r.URL.Query()["group"]
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		if err != nil {
			return nil, false, fmt.Errorf("%w: reading the body: %v", ErrBadInput, err)
		}
		if len(body) > 0 {
			var req PromoteRequest
			if err := model.Decode(body, &req); err != nil {
				return nil, false, fmt.Errorf("%w: %v", ErrBadInput, err)
			}
			groups = append(groups, req.Groups...)
		}
		return op.Promote(r.Context(), d.Namespace, d.JobID, d.JobVersion, groups)
	})
	action("fail", func(r *http.Request, d *model.Deployment) (*model.Deployment, bool, error) {
		return op.Fail(r.Context(), d.Namespace, d.JobID, d.JobVersion)
	})
	action("pause", func(r *http.Request, d *model.Deployment) (*model.Deployment, bool, error) {
		return op.Pause(r.Context(), d.Namespace, d.JobID, d.JobVersion)
	})
	action("resume", func(r *http.Request, d *model.Deployment) (*model.Deployment, bool, error) {
		return op.Resume(r.Context(), d.Namespace, d.JobID, d.JobVersion)
	})
	mux.HandleFunc("POST /v1/job/{job}/revert/{version}", func(w http.ResponseWriter, r *http.Request) {
		if op == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "rollout actions not available"})
			return
		}
		v, err := strconv.ParseUint(r.PathValue("version"), 10, 64)
		if err != nil {
			writeErr(w, fmt.Errorf("%w: version %q is not a number", ErrBadInput, r.PathValue("version")))
			return
		}
		j, err := op.Revert(r.Context(), r.URL.Query().Get("namespace"), r.PathValue("job"), v)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, ActionResult{Job: j, Changed: true})
	})
}

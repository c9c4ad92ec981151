package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/hivelet/hivelet/host/api"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
)

// apiJobWriter writes the jobs the HTTP API is sent (POST /v1/jobs,
// /v1/job/{job}/stop) with the CLI's own code, so a job written over HTTP
// gets the version, history record and stop `job run` and `job stop`
// would give it.
type apiJobWriter struct{ st *fleet.Store }

func (w apiJobWriter) RunJob(ctx context.Context, job *model.Job) (uint64, bool, error) {
	return writeJob(ctx, w.st, job)
}

func (w apiJobWriter) StopJob(ctx context.Context, namespace, id string) (uint64, bool, error) {
	job, _, err := w.st.GetJob(ctx, namespace, id)
	switch {
	case errors.Is(err, fleet.ErrNotFound):
		return 0, false, fmt.Errorf("%w: no job %q", api.ErrUnknown, id)
	case err != nil:
		return 0, false, err
	case job.Stop:
		return job.Version, false, nil
	}
	job.Stop = true
	return writeJob(ctx, w.st, job)
}

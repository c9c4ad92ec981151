package allocrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/artifact"
	"github.com/hivelet/hivelet/host/model"
)

// Task events of the artifact step.
const (
	// EventDownloadingArtifacts: the task's artifacts are being fetched.
	EventDownloadingArtifacts = "Downloading Artifacts"
	// EventArtifactFailure: an artifact could not be fetched; the task is
	// not started and the restart policy decides what comes next.
	EventArtifactFailure = "Failed Artifact Download"
)

// artifactTimeout bounds the fetch of one artifact.
const artifactTimeout = 10 * time.Minute

// artifactsDone marks, in a task's directory, that its artifacts were
// fetched: they are fetched once per allocation, not on every restart.
const artifactsDone = ".hivelet-artifacts-done"

// ArtifactFetcher downloads one artifact into a task directory (the
// artifact package's Fetcher; tests pass their own).
type ArtifactFetcher interface {
	Fetch(ctx context.Context, a model.Artifact, taskDir string) ([]string, error)
}

// artifactError marks a start that failed fetching an artifact.
type artifactError struct{ error }

// fetchArtifacts downloads the task's artifacts into its directory, unless
// an earlier start of this allocation's task did. It runs before the
// templates, so that a template's source may be a downloaded file.
func (r *Runner) fetchArtifacts(ctx context.Context, t *model.Task, env TaskEnv, taskDir string) error {
	if len(t.Artifacts) == 0 {
		return nil
	}
	marker := filepath.Join(taskDir, artifactsDone)
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	f := r.cfg.Artifacts
	if f == nil {
		f = artifact.Fetcher{}
	}
	var sources []string
	for _, a := range t.Artifacts {
		sources = append(sources, a.Source)
	}
	r.event(t.Name, EventDownloadingArtifacts, "downloading "+strings.Join(sources, ", "))
	for i, a := range t.Artifacts {
		// The source and destination may name the node or the allocation
		// (${attr.kernel.name}, ${NOMAD_ALLOC_ID}).
		a.Source = env.Replace(a.Source)
		a.Destination = env.Replace(a.Destination)
		actx, cancel := context.WithTimeout(ctx, artifactTimeout)
		written, err := f.Fetch(actx, a, taskDir)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				err = fmt.Errorf("%w (after %s)", err, artifactTimeout)
			}
			return artifactError{fmt.Errorf("artifact %d: %w", i, err)}
		}
		r.log.Info("artifact fetched", "alloc_id", env.vars["NOMAD_ALLOC_ID"], "task", t.Name, "source", a.Source, "written", written)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return artifactError{fmt.Errorf("recording the artifacts as fetched: %w", err)}
	}
	return nil
}

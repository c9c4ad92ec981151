package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	engine "github.com/hivelet/hivelet/runtime/docker"
	"github.com/hivelet/hivelet/sdk/driver"
)

// A start the host never heard the end of (the plugin was killed between
// creating the container and returning the handle) leaves a container that
// no handle names. Two labels let a later plugin process find it:
//   - LabelTaskID names the host's task ID, so DestroyTask of a task the
//     driver does not track still removes what a start of that ID left;
//   - LabelSpec is a digest of the container's spec, so a StartTask of the
//     same task with the same config adopts the running container instead of
//     starting a second copy or refusing, and one with another config
//     replaces it.
//
// Either way the interrupted start ends with the task recovered or
// destroyed (TestAStartInterruptedByAPluginSIGKILLIsAdoptedOrDestroyed).
// When the plugin survived and only the host lost the answer, the task is
// still tracked: a StartTask with the same config gets its handle back
// (sameStart), one with another config is refused.
const (
	LabelTaskID = "hivelet.task_id"
	LabelSpec   = "hivelet.spec"
)

// stampSpec adds the task ID and spec digest labels to spec.
func stampSpec(spec *engine.ContainerSpec, taskID string) {
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelTaskID] = taskID
	spec.Labels = labels
	spec.Labels[LabelSpec] = specDigest(*spec)
}

// specDigest is the SHA-256 of the spec without its LabelSpec label. The
// spec's lists are built in a fixed order (env sorted), and encoding/json
// writes map keys sorted, so equal configs give equal digests.
func specDigest(spec engine.ContainerSpec) string {
	spec.Labels = maps.Clone(spec.Labels)
	delete(spec.Labels, LabelSpec)
	b, err := json.Marshal(spec)
	if err != nil {
		// A spec is plain strings, numbers and maps of strings: it always
		// encodes. Should it not, no container ever matches the digest, so
		// nothing is adopted by mistake.
		return "unencodable"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// adoptOrClear looks at the container holding the task's name. It refuses
// one that is not the task's; removes one that is stopped, or running with
// another spec; and returns the state of one that is running with this very
// spec, for the caller to adopt. Nothing there: (nil, nil).
func (d *Driver) adoptOrClear(ctx context.Context, tc *driver.TaskConfig, spec engine.ContainerSpec) (*engine.ContainerState, error) {
	st, err := d.engine.InspectContainer(ctx, spec.Name)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !owns(st.Labels, tc.AllocID, tc.TaskName) {
		return nil, fmt.Errorf("a container named %s (%s) exists that is not this task's (no matching hivelet labels); it is left alone", spec.Name, short(st.ID))
	}
	log := d.log.With("alloc_id", tc.AllocID, "task", tc.TaskName, "container_id", short(st.ID))
	if st.Running && st.Labels[LabelSpec] == spec.Labels[LabelSpec] {
		return &st, nil
	}
	if st.Running {
		log.Warn("removing a running container of this task that no handle names and whose config differs (an interrupted start)")
		d.emit(tc.ID, tc.AllocID, tc.TaskName, "Removed container "+short(st.ID)+" left running by an interrupted start with another config", nil)
	} else {
		log.Info("removing the container of an earlier attempt")
	}
	return nil, d.engine.RemoveContainer(ctx, st.ID, true)
}

// destroyUntracked removes the containers labelled with taskID when the
// driver does not track the task: those of a start whose handle never
// reached the host. With none, notTracked (the ErrTaskNotFound of the
// lookup) is returned.
func (d *Driver) destroyUntracked(ctx context.Context, taskID string, force bool, notTracked error) error {
	list, err := d.engine.ListContainers(ctx, map[string]string{LabelTaskID: taskID})
	if err != nil {
		return fmt.Errorf("destroying task %s: %w", taskID, err)
	}
	if len(list) == 0 {
		return notTracked
	}
	for _, c := range list {
		if !force && c.State == "running" {
			return fmt.Errorf("destroying task %s: container %s is running; stop it first or force", taskID, short(c.ID))
		}
		if err := d.engine.RemoveContainer(ctx, c.ID, true); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return fmt.Errorf("destroying task %s: %w", taskID, err)
		}
		d.log.Info("removed a container of a task this driver did not track (an interrupted start)", "alloc_id", c.Labels[LabelAllocID], "task", c.Labels[LabelTask], "container_id", short(c.ID))
	}
	return nil
}

// sameStart is the handle of t, tracked and running, when its container
// runs spec's very config: what a repeated StartTask should have answered.
func (d *Driver) sameStart(ctx context.Context, t *task, spec engine.ContainerSpec) (*driver.TaskHandle, bool) {
	st, err := d.engine.InspectContainer(ctx, t.containerID)
	if err != nil || !st.Running || st.Labels[LabelSpec] != spec.Labels[LabelSpec] {
		return nil, false
	}
	h, err := encodeHandle(t.id, t.state, t.startedAt)
	return h, err == nil
}

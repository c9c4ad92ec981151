package model

// LifecycleHook is when a task runs relative to the group's main tasks:
// prestart (before them), poststart (once they all run) or poststop (once
// every other task of the allocation is gone).
type LifecycleHook string

const (
	HookPrestart  LifecycleHook = "prestart"
	HookPoststart LifecycleHook = "poststart"
	HookPoststop  LifecycleHook = "poststop"
)

// LifecycleHooks lists every LifecycleHook value.
var LifecycleHooks = []LifecycleHook{HookPrestart, HookPoststart, HookPoststop}

func (h *LifecycleHook) UnmarshalJSON(b []byte) error { return decodeEnum(b, h, LifecycleHooks) }

// Lifecycle makes a task a hook of its group. A prestart task that is not a
// sidecar runs to completion, once per allocation, before the main tasks
// start; a prestart sidecar starts with them and keeps running. A
// poststart task starts once every main task is running: to completion,
// once per allocation, unless it is a sidecar, which keeps running. A
// poststop task runs to completion once every other task of the
// allocation has finished, whether they completed, failed or were stopped
// with the allocation (it is never a sidecar).
type Lifecycle struct {
	Hook    LifecycleHook `json:"hook"`
	Sidecar bool          `json:"sidecar,omitempty"`
}

// IsInit reports whether t runs to completion before its group's main
// tasks (a prestart hook that is not a sidecar).
func (t *Task) IsInit() bool {
	return t != nil && t.Lifecycle != nil && t.Lifecycle.Hook == HookPrestart && !t.Lifecycle.Sidecar
}

// IsPoststart reports whether t starts once its group's main tasks run.
func (t *Task) IsPoststart() bool {
	return t != nil && t.Lifecycle != nil && t.Lifecycle.Hook == HookPoststart
}

// RunsToCompletion reports whether t is a hook that runs once and is done
// (prestart or poststart, not a sidecar): a successful exit completes it,
// and once complete it holds neither health nor services back.
func (t *Task) RunsToCompletion() bool {
	return t != nil && t.Lifecycle != nil && !t.Lifecycle.Sidecar
}

// IsPoststop reports whether t runs once the allocation's other tasks are
// gone.
func (t *Task) IsPoststop() bool {
	return t != nil && t.Lifecycle != nil && t.Lifecycle.Hook == HookPoststop
}

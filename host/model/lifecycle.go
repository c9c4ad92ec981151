package model

// LifecycleHook is when a task runs relative to the group's main tasks:
// prestart (before them) or poststart (once they all run). poststop is
// refused by the parser with its reason.
type LifecycleHook string

const (
	HookPrestart  LifecycleHook = "prestart"
	HookPoststart LifecycleHook = "poststart"
)

// LifecycleHooks lists every LifecycleHook value.
var LifecycleHooks = []LifecycleHook{HookPrestart, HookPoststart}

func (h *LifecycleHook) UnmarshalJSON(b []byte) error { return decodeEnum(b, h, LifecycleHooks) }

// Lifecycle makes a task a hook of its group. A prestart task that is not a
// sidecar runs to completion, once per allocation, before the main tasks
// start; a prestart sidecar starts with them and keeps running. A
// poststart task starts once every main task is running: to completion,
// once per allocation, unless it is a sidecar, which keeps running.
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

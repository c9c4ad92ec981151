package model

// LifecycleHook is when a task runs relative to the group's main tasks.
// Only prestart exists: poststart and poststop are refused by the parser
// with their reason.
type LifecycleHook string

const HookPrestart LifecycleHook = "prestart"

// LifecycleHooks lists every LifecycleHook value.
var LifecycleHooks = []LifecycleHook{HookPrestart}

func (h *LifecycleHook) UnmarshalJSON(b []byte) error { return decodeEnum(b, h, LifecycleHooks) }

// Lifecycle makes a task a hook of its group. A prestart task that is not a
// sidecar runs to completion, once per allocation, before the main tasks
// start; a prestart sidecar starts with them and keeps running.
type Lifecycle struct {
	Hook    LifecycleHook `json:"hook"`
	Sidecar bool          `json:"sidecar,omitempty"`
}

// IsInit reports whether t runs to completion before its group's main
// tasks (a prestart hook that is not a sidecar).
func (t *Task) IsInit() bool {
	return t != nil && t.Lifecycle != nil && t.Lifecycle.Hook == HookPrestart && !t.Lifecycle.Sidecar
}

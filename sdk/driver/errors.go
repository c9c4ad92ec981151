package driver

import "errors"

// ErrTaskNotFound is returned for a task ID the driver does not know, and by
// RecoverTask for a task that is gone (or, for a process, whose PID now
// belongs to another process). It survives the plugin boundary: errors.Is
// works on the host side.
var ErrTaskNotFound = errors.New("task not found")

// ErrNotSupported is returned by a driver for an optional method it does not
// implement (Base answers it for InspectTask, TaskStats, TaskEvents and
// SignalTask). It survives the plugin boundary as the gRPC code
// Unimplemented, which is also what a plugin built against an older SDK
// answers for an RPC it has never heard of: either way the host reads
// errors.Is(err, ErrNotSupported) and does without the feature.
var ErrNotSupported = errors.New("not supported by this driver")

package driver

import "errors"

// ErrTaskNotFound is returned for a task ID the driver does not know, and by
// RecoverTask for a task that is gone (or, for a process, whose PID now
// belongs to another process). It survives the plugin boundary: errors.Is
// works on the host side.
var ErrTaskNotFound = errors.New("task not found")

package driver

import "errors"

// ErrTaskNotFound is returned for a task ID the driver does not know.
var ErrTaskNotFound = errors.New("task not found")

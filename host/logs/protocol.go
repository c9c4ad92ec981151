package logs

import (
	"fmt"
	"regexp"
	"time"

	"github.com/hivelet/hivelet/host/wanted"
)

// Limits of the protocol. A server clamps what a request asks to these.
const (
	// ChunkLimit is the most data one reply carries: well under NATS's
	// default max_payload of 1 MiB even base64-encoded in JSON.
	ChunkLimit = 256 << 10
	// MaxWait is the longest a server holds a long poll.
	MaxWait = 10 * time.Second
)

// Reply error codes: what kind of failure Reply.Error describes.
const (
	CodeBadRequest   = "bad_request"   // the request cannot be valid
	CodeUnknownAlloc = "unknown_alloc" // this node does not know the allocation (now)
	CodeUnknownTask  = "unknown_task"  // the allocation has no such task
	CodeUnreadable   = "unreadable"    // the file exists but cannot be served
	CodeBusy         = "busy"          // too many requests in flight: retry
	CodeStopping     = "stopping"      // the agent is shutting down
)

// Request asks a node's agent for part of a task's log file.
type Request struct {
	AllocID string `json:"alloc_id"`
	Task    string `json:"task"`
	// Stderr selects the task's stderr file instead of its stdout.
	Stderr bool `json:"stderr,omitempty"`
	// Offset is where to read from. Negative: that many bytes before the
	// end (a tail; an offset before the start reads from 0).
	Offset int64 `json:"offset"`
	// Max bounds the data in the reply; 0 or more than ChunkLimit means
	// ChunkLimit.
	Max int64 `json:"max,omitempty"`
	// WaitMS is a long poll: when there is no data past Offset and the
	// allocation is not terminal, the server waits up to this long (capped
	// at MaxWait) for some before replying.
	WaitMS int64 `json:"wait_ms,omitempty"`
	// FileID, when set, is the identity of the file the offset belongs to
	// (a previous Reply.FileID): if the file is another one now (rotated),
	// the reply is a reset even when the new file is longer than Offset.
	FileID string `json:"file_id,omitempty"`
}

// Reply is a node's answer to a Request.
type Reply struct {
	Data []byte `json:"data,omitempty"`
	// Offset is the offset after Data: the next request's Offset.
	Offset int64 `json:"offset"`
	// Size is the file's size when it was read (0 while it does not exist).
	Size int64 `json:"size"`
	// FileID identifies the file read (device and inode); empty while the
	// file does not exist.
	FileID string `json:"file_id,omitempty"`
	// Reset: the file is shorter than the offset asked, or is another file
	// than FileID; Data starts at offset 0 of the file as it is now.
	Reset bool `json:"reset,omitempty"`
	// Done: the allocation is terminal and Offset is the end of the file:
	// nothing more will come.
	Done bool `json:"done,omitempty"`
	// Error, when set, is why the request was not served; Code classifies
	// it (Code* constants).
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

// Subject is the subject on which the agent of nodeID serves log requests.
func Subject(prefix, nodeID string) (string, error) {
	return wanted.NodeSubject(prefix, "logs", nodeID)
}

// nameRE is what allocation IDs and task names can be (host/model's rule
// for names, which allocation IDs, UUIDs, also meet). It has no '/' and
// no leading '.': no such name can step out of a directory.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

const maxNameLen = 128

func checkName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > maxNameLen:
		return fmt.Errorf("%s is longer than %d characters", what, maxNameLen)
	case !nameRE.MatchString(s):
		return fmt.Errorf("%s %q may contain only letters, digits, '_', '-' and '.', and must not start with '-' or '.'", what, s)
	}
	return nil
}

// Check reports the first field of r that no server would accept.
func (r Request) Check() error {
	if err := checkName("alloc_id", r.AllocID); err != nil {
		return err
	}
	if err := checkName("task", r.Task); err != nil {
		return err
	}
	if r.Max < 0 {
		return fmt.Errorf("max is %d: it must not be negative", r.Max)
	}
	if r.WaitMS < 0 {
		return fmt.Errorf("wait_ms is %d: it must not be negative", r.WaitMS)
	}
	return nil
}

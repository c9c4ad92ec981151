package logs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hivelet/hivelet/internal/wait"
)

// DefaultTimeout bounds the wait for a reply beyond the request's own long
// poll, when the caller sets no deadline.
const DefaultTimeout = 5 * time.Second

// RemoteError is a reply's error: the agent answered and refused.
type RemoteError struct {
	NodeID  string
	Code    string // a Code* constant
	Message string
}

func (e *RemoteError) Error() string { return e.Message }

// NoAgentError means nobody serves the node's subject: its agent is not
// running or not connected to this NATS account.
type NoAgentError struct{ NodeID string }

func (e *NoAgentError) Error() string {
	return fmt.Sprintf("the agent of node %s did not answer (is it running?)", e.NodeID)
}

// Unwrap makes errors.Is(err, nats.ErrNoResponders) hold.
func (e *NoAgentError) Unwrap() error { return nats.ErrNoResponders }

// Fetch sends one request to the agent of nodeID and returns its reply. The
// request lasts until ctx's deadline; without one, until the request's wait
// plus DefaultTimeout. A reply carrying an error is returned with a
// *RemoteError.
func Fetch(ctx context.Context, nc *nats.Conn, prefix, nodeID string, req Request) (*Reply, error) {
	subj, err := Subject(prefix, nodeID)
	if err != nil {
		return nil, err
	}
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("log request: %w", err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	m, err := request(ctx, nc, subj, nodeID, body, time.Duration(min(req.WaitMS, MaxWait.Milliseconds()))*time.Millisecond+DefaultTimeout, "logs")
	if err != nil {
		return nil, err
	}
	var rep Reply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return nil, fmt.Errorf("node %s sent an unreadable log reply: %v", nodeID, err)
	}
	if rep.Error != "" {
		return &rep, &RemoteError{NodeID: nodeID, Code: rep.Code, Message: rep.Error}
	}
	if rep.Offset < 0 || rep.Size < 0 || rep.Offset < int64(len(rep.Data)) {
		return nil, fmt.Errorf("node %s sent an inconsistent log reply (offset %d, size %d, %d bytes)", nodeID, rep.Offset, rep.Size, len(rep.Data))
	}
	return &rep, nil
}

// request sends body to the agent of nodeID on subj and returns its reply,
// within ctx's deadline or else timeout; what names what was asked for in
// an error.
func request(ctx context.Context, nc *nats.Conn, subj, nodeID string, body []byte, timeout time.Duration, what string) (*nats.Msg, error) {
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	m, err := nc.RequestWithContext(ctx, subj, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &NoAgentError{NodeID: nodeID}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, fmt.Errorf("the agent of node %s did not reply on %s within %s", nodeID, subj, timeout.Round(time.Millisecond))
	case err != nil:
		return nil, fmt.Errorf("requesting %s from node %s: %w", what, nodeID, err)
	}
	return m, nil
}

// CopyOptions shape Copy.
type CopyOptions struct {
	// Follow keeps long-polling for new output until ctx ends or the
	// allocation is done.
	Follow bool
	// Notices receives one line when the file was rotated or truncated
	// (reading restarts at its start) and when a followed agent stops
	// answering; nil discards them.
	Notices io.Writer
	// Timeout bounds each reply beyond its long poll; 0 is DefaultTimeout.
	Timeout time.Duration
}

// Copy writes a task's log to w from req.Offset: to the end of the file as
// it was at the first reply, or, with Follow, on and on until the
// allocation is done or ctx ends (which is then not an error). A busy
// agent is retried; a followed agent that stops answering (restarting) is
// retried after a notice, but one that never answered is an error.
func Copy(ctx context.Context, nc *nats.Conn, prefix, nodeID string, req Request, w io.Writer, opt CopyOptions) error {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	notice := func(format string, a ...any) {
		if opt.Notices != nil {
			fmt.Fprintf(opt.Notices, format+"\n", a...)
		}
	}
	req.FileID = ""
	target := int64(-1) // without Follow: the size to reach
	caughtUp, answered, outage := false, false, false
	busy, backoff := 0, 250*time.Millisecond
	for {
		r := req
		r.WaitMS = 0
		if opt.Follow && caughtUp {
			r.WaitMS = MaxWait.Milliseconds()
		}
		rctx, cancel := context.WithTimeout(ctx, time.Duration(r.WaitMS)*time.Millisecond+opt.Timeout)
		rep, err := Fetch(rctx, nc, prefix, nodeID, r)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				if opt.Follow {
					return nil
				}
				return ctx.Err()
			}
			if errors.Is(err, nats.ErrConnectionClosed) {
				return err // nothing to wait for
			}
			var re *RemoteError
			isBusy := errors.As(err, &re) && re.Code == CodeBusy
			transient := isBusy || (errors.As(err, &re) && re.Code == CodeStopping) || !errors.As(err, &re)
			switch {
			case isBusy && (opt.Follow || busy < 5):
				busy++
			case opt.Follow && answered && transient:
				if !outage {
					notice("hivelet: %v; retrying", err)
					outage = true
				}
			default:
				return err
			}
			if !wait.For(ctx, backoff) {
				if opt.Follow {
					return nil
				}
				return ctx.Err()
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		if outage {
			notice("hivelet: the agent of node %s answers again", nodeID)
		}
		answered, outage, busy, backoff = true, false, 0, 250*time.Millisecond
		if rep.Reset {
			notice("hivelet: the log file was rotated or truncated; continuing from its start")
		}
		if len(rep.Data) > 0 {
			if _, err := w.Write(rep.Data); err != nil {
				return fmt.Errorf("writing the log: %w", err)
			}
		}
		req.Offset, req.FileID = rep.Offset, rep.FileID
		if !opt.Follow {
			if target < 0 || rep.Reset {
				target = rep.Size
			}
			if req.Offset >= target || len(rep.Data) == 0 {
				return nil
			}
			continue
		}
		if rep.Done {
			return nil
		}
		caughtUp = req.Offset >= rep.Size
	}
}

package logs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// DetailsSubject is the subject on which the agent of nodeID serves the
// whole record of an allocation it runs or ran (every event of its tasks;
// the allocations bucket carries a compact copy: allocrunner.ForWire).
func DetailsSubject(prefix, nodeID string) (string, error) {
	return wanted.NodeSubject(prefix, "alloc", nodeID)
}

// DetailsRequest asks a node's agent for an allocation's whole record.
type DetailsRequest struct {
	AllocID string `json:"alloc_id"`
}

// DetailsReply is a node's answer to a DetailsRequest: the allocation, or
// why not (Code: CodeUnknownAlloc, CodeBadRequest, CodeStopping).
type DetailsReply struct {
	Alloc *model.Allocation `json:"alloc,omitempty"`
	Error string            `json:"error,omitempty"`
	Code  string            `json:"code,omitempty"`
}

// DetailsResolver is what the node knows of an allocation: its whole
// record (read-only: the server only encodes it), and whether it knows it.
type DetailsResolver func(allocID string) (*model.Allocation, bool)

// DetailsServer answers allocation-details requests for one node.
type DetailsServer struct {
	nc      *nats.Conn
	nodeID  string
	resolve DetailsResolver
	log     *slog.Logger
	sub     *nats.Subscription

	mu      sync.Mutex
	stopped bool
}

// ServeDetails subscribes to DetailsSubject(prefix, nodeID) on nc and
// answers from r until Stop. A request is a map lookup and an encoding, so
// it is answered on the subscription's goroutine, one at a time.
func ServeDetails(nc *nats.Conn, prefix, nodeID string, r DetailsResolver, log *slog.Logger) (*DetailsServer, error) {
	if nc == nil || r == nil {
		return nil, errors.New("logs: ServeDetails needs a NATS connection and a resolver")
	}
	subj, err := DetailsSubject(prefix, nodeID)
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	s := &DetailsServer{nc: nc, nodeID: nodeID, resolve: r, log: log}
	if s.sub, err = subscribe(nc, subj, s.onMsg, log); err != nil {
		return nil, err
	}
	return s, nil
}

// Stop unsubscribes and, while connected, waits until the NATS server has
// taken the subscription away, so that no request is routed here once Stop
// returns (a requester gets "no responders" at once, not a timeout). It may
// be called more than once.
func (s *DetailsServer) Stop() {
	s.mu.Lock()
	already := s.stopped
	s.stopped = true
	s.mu.Unlock()
	if already {
		return
	}
	unsubscribe(s.nc, s.sub, s.log, "the details service")
}

func (s *DetailsServer) onMsg(m *nats.Msg) {
	rep := s.handle(m.Data)
	b, err := json.Marshal(rep)
	if err == nil {
		err = m.Respond(b)
	}
	if err != nil {
		s.log.Warn("logs: replying to a details request", "err", err)
	}
}

func (s *DetailsServer) handle(data []byte) *DetailsReply {
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return &DetailsReply{Code: CodeStopping, Error: fmt.Sprintf("the agent of node %s is shutting down", s.nodeID)}
	}
	var req DetailsRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return &DetailsReply{Code: CodeBadRequest, Error: fmt.Sprintf("decoding the details request: %v", err)}
	}
	if err := checkName("alloc_id", req.AllocID); err != nil {
		return &DetailsReply{Code: CodeBadRequest, Error: "details request: " + err.Error()}
	}
	a, ok := s.resolve(req.AllocID)
	if !ok || a == nil {
		return &DetailsReply{Code: CodeUnknownAlloc, Error: fmt.Sprintf("node %s has no allocation %s", s.nodeID, req.AllocID)}
	}
	return &DetailsReply{Alloc: a}
}

// FetchDetails asks the agent of nodeID for the whole record of allocation
// allocID, within ctx's deadline (DefaultTimeout without one). A refusal
// is a *RemoteError; no agent listening, a *NoAgentError.
func FetchDetails(ctx context.Context, nc *nats.Conn, prefix, nodeID, allocID string) (*model.Allocation, error) {
	subj, err := DetailsSubject(prefix, nodeID)
	if err != nil {
		return nil, err
	}
	if err := checkName("alloc_id", allocID); err != nil {
		return nil, fmt.Errorf("details request: %w", err)
	}
	body, err := json.Marshal(DetailsRequest{AllocID: allocID})
	if err != nil {
		return nil, err
	}
	m, err := request(ctx, nc, subj, nodeID, body, DefaultTimeout, "allocation "+allocID)
	if err != nil {
		return nil, err
	}
	var rep DetailsReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return nil, fmt.Errorf("node %s sent an unreadable details reply: %v", nodeID, err)
	}
	if rep.Error != "" {
		return nil, &RemoteError{NodeID: nodeID, Code: rep.Code, Message: rep.Error}
	}
	if rep.Alloc == nil || rep.Alloc.ID != allocID {
		return nil, fmt.Errorf("node %s answered for allocation %s with another record", nodeID, allocID)
	}
	return rep.Alloc, nil
}

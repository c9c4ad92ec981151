package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	driverpb "github.com/hivelet/hivelet/sdk/driver/proto"
)

// This file converts between the Go values of this package and their wire
// form. Each pair is exact: toX(fromX(v)) == v for every value a driver can
// produce (times keep nanoseconds; zero times stay zero).

func tsToPB(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func tsFromPB(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func schemaToPB(s *Schema) *driverpb.Schema {
	if s == nil {
		return nil
	}
	out := &driverpb.Schema{Fields: make(map[string]*driverpb.Field, len(s.Fields))}
	for name, f := range s.Fields {
		if f == nil {
			continue
		}
		out.Fields[name] = &driverpb.Field{
			Type:        string(f.Type),
			Required:    f.Required,
			Description: f.Description,
			Elem:        schemaToPB(f.Elem),
		}
	}
	return out
}

func schemaFromPB(s *driverpb.Schema) *Schema {
	if s == nil {
		return nil
	}
	out := &Schema{Fields: make(map[string]*Field, len(s.Fields))}
	for name, f := range s.Fields {
		out.Fields[name] = &Field{
			Type:        FieldType(f.GetType()),
			Required:    f.GetRequired(),
			Description: f.GetDescription(),
			Elem:        schemaFromPB(f.GetElem()),
		}
	}
	return out
}

func taskConfigToPB(c *TaskConfig) (*driverpb.TaskConfig, error) {
	var cfg []byte
	if c.Config != nil {
		var err error
		if cfg, err = json.Marshal(c.Config); err != nil {
			return nil, fmt.Errorf("encoding config of task %s: %w", c.ID, err)
		}
	}
	return &driverpb.TaskConfig{
		Id:          c.ID,
		AllocId:     c.AllocID,
		TaskName:    c.TaskName,
		JobId:       c.JobID,
		Group:       c.Group,
		NodeId:      c.NodeID,
		ConfigJson:  cfg,
		Env:         c.Env,
		User:        c.User,
		Resources:   &driverpb.Resources{Cpu: int64(c.Resources.CPU), MemoryMb: int64(c.Resources.MemoryMB)},
		AllocDir:    c.AllocDir,
		StdoutPath:  c.StdoutPath,
		StderrPath:  c.StderrPath,
		KillSignal:  c.KillSignal,
		NetworkMode: c.NetworkMode,
		Mounts:      mountsToPB(c.Mounts),
	}, nil
}

func mountsToPB(ms []Mount) []*driverpb.Mount {
	var out []*driverpb.Mount
	for _, m := range ms {
		out = append(out, &driverpb.Mount{HostPath: m.HostPath, TaskPath: m.TaskPath, ReadOnly: m.ReadOnly, PropagationMode: m.PropagationMode})
	}
	return out
}

func mountsFromPB(ms []*driverpb.Mount) []Mount {
	var out []Mount
	for _, m := range ms {
		out = append(out, Mount{HostPath: m.GetHostPath(), TaskPath: m.GetTaskPath(), ReadOnly: m.GetReadOnly(), PropagationMode: m.GetPropagationMode()})
	}
	return out
}

func taskConfigFromPB(c *driverpb.TaskConfig) (*TaskConfig, error) {
	if c == nil {
		return nil, errors.New("no task config")
	}
	out := &TaskConfig{
		ID:          c.GetId(),
		AllocID:     c.GetAllocId(),
		TaskName:    c.GetTaskName(),
		JobID:       c.GetJobId(),
		Group:       c.GetGroup(),
		NodeID:      c.GetNodeId(),
		Env:         c.GetEnv(),
		User:        c.GetUser(),
		AllocDir:    c.GetAllocDir(),
		StdoutPath:  c.GetStdoutPath(),
		StderrPath:  c.GetStderrPath(),
		KillSignal:  c.GetKillSignal(),
		NetworkMode: c.GetNetworkMode(),
		Mounts:      mountsFromPB(c.GetMounts()),
		Resources: Resources{
			CPU:      int(c.GetResources().GetCpu()),
			MemoryMB: int(c.GetResources().GetMemoryMb()),
		},
	}
	if len(c.GetConfigJson()) > 0 {
		if err := json.Unmarshal(c.GetConfigJson(), &out.Config); err != nil {
			return nil, fmt.Errorf("decoding config of task %s: %w", out.ID, err)
		}
	}
	return out, nil
}

func handleToPB(h *TaskHandle) *driverpb.TaskHandle {
	if h == nil {
		return nil
	}
	return &driverpb.TaskHandle{
		Version:     int64(h.Version),
		TaskId:      h.TaskID,
		Driver:      h.Driver,
		DriverState: h.DriverState,
		StartedAt:   tsToPB(h.StartedAt),
	}
}

func handleFromPB(h *driverpb.TaskHandle) *TaskHandle {
	if h == nil {
		return nil
	}
	return &TaskHandle{
		Version:     int(h.GetVersion()),
		TaskID:      h.GetTaskId(),
		Driver:      h.GetDriver(),
		DriverState: h.GetDriverState(),
		StartedAt:   tsFromPB(h.GetStartedAt()),
	}
}

func exitToPB(r *ExitResult) *driverpb.ExitResult {
	if r == nil {
		return nil
	}
	return &driverpb.ExitResult{
		ExitCode:  int64(r.ExitCode),
		Signal:    int64(r.Signal),
		OomKilled: r.OOMKilled,
		Err:       r.Err,
	}
}

func exitFromPB(r *driverpb.ExitResult) *ExitResult {
	if r == nil {
		return nil
	}
	return &ExitResult{
		ExitCode:  int(r.GetExitCode()),
		Signal:    int(r.GetSignal()),
		OOMKilled: r.GetOomKilled(),
		Err:       r.GetErr(),
	}
}

func statusToPB(s *TaskStatus) *driverpb.TaskStatus {
	return &driverpb.TaskStatus{
		Id:          s.ID,
		Name:        s.Name,
		State:       string(s.State),
		StartedAt:   tsToPB(s.StartedAt),
		CompletedAt: tsToPB(s.CompletedAt),
		ExitResult:  exitToPB(s.ExitResult),
		Attributes:  s.Attributes,
	}
}

func statusFromPB(s *driverpb.TaskStatus) *TaskStatus {
	return &TaskStatus{
		ID:          s.GetId(),
		Name:        s.GetName(),
		State:       TaskState(s.GetState()),
		StartedAt:   tsFromPB(s.GetStartedAt()),
		CompletedAt: tsFromPB(s.GetCompletedAt()),
		ExitResult:  exitFromPB(s.GetExitResult()),
		Attributes:  s.GetAttributes(),
	}
}

func eventToPB(e *TaskEvent) *driverpb.TaskEvent {
	return &driverpb.TaskEvent{
		TaskId:      e.TaskID,
		AllocId:     e.AllocID,
		TaskName:    e.TaskName,
		Timestamp:   tsToPB(e.Timestamp),
		Message:     e.Message,
		Annotations: e.Annotations,
	}
}

func eventFromPB(e *driverpb.TaskEvent) *TaskEvent {
	return &TaskEvent{
		TaskID:      e.GetTaskId(),
		AllocID:     e.GetAllocId(),
		TaskName:    e.GetTaskName(),
		Timestamp:   tsFromPB(e.GetTimestamp()),
		Message:     e.GetMessage(),
		Annotations: e.GetAnnotations(),
	}
}

func durToPB(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func durFromPB(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// errToStatus turns a driver error into a gRPC status, keeping
// ErrTaskNotFound and ErrNotSupported recognisable on the other side.
func errToStatus(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrTaskNotFound) {
		return status.Error(codes.NotFound, err.Error())
	}
	if errors.Is(err, ErrNotSupported) {
		return status.Error(codes.Unimplemented, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unknown, err.Error())
}

// errFromStatus is the inverse of errToStatus: NotFound becomes an error
// wrapping ErrTaskNotFound, Unimplemented (a Base method, or an RPC the
// plugin's SDK predates) one wrapping ErrNotSupported; other errors keep their message (and their gRPC
// status, so callers can tell a lost connection, codes.Unavailable, from a
// driver's refusal).
func errFromStatus(what string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if ok && st.Code() == codes.NotFound {
		msg := strings.TrimSuffix(st.Message(), ErrTaskNotFound.Error())
		return fmt.Errorf("%s: %s%w", what, msg, ErrTaskNotFound)
	}
	if ok && st.Code() == codes.Unimplemented {
		return fmt.Errorf("%s: %s: %w", what, st.Message(), ErrNotSupported)
	}
	if ok && st.Code() == codes.Unknown {
		// The driver's own error: its message, without gRPC's "rpc error:
		// code = Unknown desc =" and without saying twice what was being
		// done when the driver already said it.
		return &driverError{what: what, st: st}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// driverError is an error a driver returned across the boundary. It keeps
// its gRPC status for callers that tell codes apart.
type driverError struct {
	what string
	st   *status.Status
}

func (e *driverError) Error() string {
	if msg := e.st.Message(); strings.HasPrefix(msg, e.what) {
		return msg
	}
	return e.what + ": " + e.st.Message()
}

// GRPCStatus lets status.FromError see the driver's status.
func (e *driverError) GRPCStatus() *status.Status { return e.st }

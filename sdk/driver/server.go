package driver

import (
	"context"

	"google.golang.org/grpc/metadata"

	driverpb "github.com/hivelet/hivelet/sdk/driver/proto"
)

// server adapts a Driver to the generated gRPC service. It runs inside the
// plugin process.
type server struct {
	driverpb.UnimplementedDriverServer
	impl Driver
}

// accept tells the client that the driver accepted a server-streaming call
// (see awaitAccepted): a refusal is then an error status with no header.
func accept(stream interface{ SendHeader(metadata.MD) error }) error {
	return stream.SendHeader(metadata.Pairs(acceptedHeader, "1"))
}

func (s *server) Info(ctx context.Context, _ *driverpb.InfoRequest) (*driverpb.InfoResponse, error) {
	info, err := s.impl.Info(ctx)
	if err != nil {
		return nil, errToStatus(err)
	}
	return &driverpb.InfoResponse{Name: info.Name, Version: info.Version}, nil
}

func (s *server) Capabilities(ctx context.Context, _ *driverpb.CapabilitiesRequest) (*driverpb.CapabilitiesResponse, error) {
	c, err := s.impl.Capabilities(ctx)
	if err != nil {
		return nil, errToStatus(err)
	}
	return &driverpb.CapabilitiesResponse{SendSignals: c.SendSignals, Exec: c.Exec, FsIsolation: c.FSIsolation, Mounts: c.Mounts}, nil
}

func (s *server) ConfigSchema(ctx context.Context, _ *driverpb.ConfigSchemaRequest) (*driverpb.ConfigSchemaResponse, error) {
	sc, err := s.impl.ConfigSchema(ctx)
	if err != nil {
		return nil, errToStatus(err)
	}
	return &driverpb.ConfigSchemaResponse{Schema: schemaToPB(sc)}, nil
}

func (s *server) Fingerprint(_ *driverpb.FingerprintRequest, stream driverpb.Driver_FingerprintServer) error {
	ch, err := s.impl.Fingerprint(stream.Context())
	if err != nil {
		return errToStatus(err)
	}
	if err := accept(stream); err != nil {
		return err
	}
	for fp := range ch {
		if fp == nil {
			continue
		}
		if err := stream.Send(&driverpb.FingerprintResponse{
			Healthy: fp.Healthy, Description: fp.Description, Attributes: fp.Attributes,
		}); err != nil {
			return err
		}
	}
	return nil
}

func (s *server) StartTask(ctx context.Context, req *driverpb.StartTaskRequest) (*driverpb.StartTaskResponse, error) {
	cfg, err := taskConfigFromPB(req.GetTask())
	if err != nil {
		return nil, errToStatus(err)
	}
	h, err := s.impl.StartTask(ctx, cfg)
	if err != nil {
		return nil, errToStatus(err)
	}
	return &driverpb.StartTaskResponse{Handle: handleToPB(h)}, nil
}

func (s *server) RecoverTask(ctx context.Context, req *driverpb.RecoverTaskRequest) (*driverpb.RecoverTaskResponse, error) {
	h := handleFromPB(req.GetHandle())
	if h == nil {
		return nil, errToStatus(errNoHandle)
	}
	if err := s.impl.RecoverTask(ctx, h); err != nil {
		return nil, errToStatus(err)
	}
	return &driverpb.RecoverTaskResponse{}, nil
}

func (s *server) WaitTask(req *driverpb.WaitTaskRequest, stream driverpb.Driver_WaitTaskServer) error {
	ch, err := s.impl.WaitTask(stream.Context(), req.GetTaskId())
	if err != nil {
		return errToStatus(err)
	}
	if err := accept(stream); err != nil {
		return err
	}
	select {
	case r, ok := <-ch:
		if !ok || r == nil {
			return nil
		}
		return stream.Send(exitToPB(r))
	case <-stream.Context().Done():
		return stream.Context().Err()
	}
}

func (s *server) StopTask(ctx context.Context, req *driverpb.StopTaskRequest) (*driverpb.StopTaskResponse, error) {
	if err := s.impl.StopTask(ctx, req.GetTaskId(), durFromPB(req.GetTimeout()), req.GetSignal()); err != nil {
		return nil, errToStatus(err)
	}
	return &driverpb.StopTaskResponse{}, nil
}

func (s *server) DestroyTask(ctx context.Context, req *driverpb.DestroyTaskRequest) (*driverpb.DestroyTaskResponse, error) {
	if err := s.impl.DestroyTask(ctx, req.GetTaskId(), req.GetForce()); err != nil {
		return nil, errToStatus(err)
	}
	return &driverpb.DestroyTaskResponse{}, nil
}

func (s *server) InspectTask(ctx context.Context, req *driverpb.InspectTaskRequest) (*driverpb.TaskStatus, error) {
	st, err := s.impl.InspectTask(ctx, req.GetTaskId())
	if err != nil {
		return nil, errToStatus(err)
	}
	return statusToPB(st), nil
}

func (s *server) TaskStats(req *driverpb.TaskStatsRequest, stream driverpb.Driver_TaskStatsServer) error {
	ch, err := s.impl.TaskStats(stream.Context(), req.GetTaskId(), durFromPB(req.GetInterval()))
	if err != nil {
		return errToStatus(err)
	}
	if err := accept(stream); err != nil {
		return err
	}
	for u := range ch {
		if u == nil {
			continue
		}
		if err := stream.Send(&driverpb.TaskResourceUsage{
			Timestamp: tsToPB(u.Timestamp), CpuPercent: u.CPUPercent, MemoryBytes: u.MemoryBytes,
		}); err != nil {
			return err
		}
	}
	return nil
}

func (s *server) TaskEvents(_ *driverpb.TaskEventsRequest, stream driverpb.Driver_TaskEventsServer) error {
	ch, err := s.impl.TaskEvents(stream.Context())
	if err != nil {
		return errToStatus(err)
	}
	if err := accept(stream); err != nil {
		return err
	}
	for e := range ch {
		if e == nil {
			continue
		}
		if err := stream.Send(eventToPB(e)); err != nil {
			return err
		}
	}
	return nil
}

func (s *server) SignalTask(ctx context.Context, req *driverpb.SignalTaskRequest) (*driverpb.SignalTaskResponse, error) {
	if err := s.impl.SignalTask(ctx, req.GetTaskId(), req.GetSignal()); err != nil {
		return nil, errToStatus(err)
	}
	return &driverpb.SignalTaskResponse{}, nil
}

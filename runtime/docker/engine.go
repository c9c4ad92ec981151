// Package docker is hivelet's wrapper of the Docker Engine API.
//
// It owns every call to the engine and is the only package of the module
// that imports github.com/docker/docker/... or github.com/moby/moby/...
// (TestOnlyThisPackageImportsTheDockerClient): callers see plain values
// (ContainerSpec, ContainerState, Stats...) so a move to the successor module
// (github.com/moby/moby/client) stays inside this directory.
//
// Invariants:
//   - The client negotiates the API version: the engine on our machines
//     speaks API 1.41, so nothing here needs a later API. In particular the
//     stop signal is part of ContainerSpec (set at creation), because
//     ContainerStop's signal option needs API 1.42.
//   - Every call takes a context and does not outlive it; ImagePull in
//     particular returns as soon as its context ends.
//   - This package never decides which containers are whose: selection by
//     ownership labels is the driver's job (plugins/docker). ListContainers
//     only filters by the labels it is given.
//
// The log streamer (logs.go) demultiplexes the engine's log stream into
// size-rotated files and remembers the timestamp of the last entry written,
// so a later streamer resumes without duplicating.
//
// Tests run against the real engine (engine_test.go); with
// HIVELET_REQUIRE_DOCKER=1 they fail, never skip, when the engine is down.
//
// What the driver built on it promises is specified in docs/docker-driver.md.
package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"
)

// ErrNotFound is returned (wrapped) when a container or image does not exist.
var ErrNotFound = errors.New("not found")

// Client talks to one Docker engine. It is safe for concurrent use.
type Client struct {
	api *client.Client
}

// Options say how to reach the engine.
type Options struct {
	// Host is the engine address (e.g. "unix:///var/run/docker.sock"); empty
	// means the environment (DOCKER_HOST) or the default socket.
	Host string
}

// New returns a client for the engine. It does not connect: the first call
// does, and negotiates the API version then.
func New(opts Options) (*Client, error) {
	clientOpts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if opts.Host != "" {
		clientOpts = append(clientOpts, client.WithHost(opts.Host))
	}
	api, err := client.NewClientWithOpts(clientOpts...)
	if err != nil {
		return nil, fmt.Errorf("creating docker client: %w", err)
	}
	return &Client{api: api}, nil
}

// Unreachable reports whether err says the call never reached an engine
// that could answer it: the engine is down, restarting, or went away in
// the middle of the call.
func Unreachable(err error) bool {
	return err != nil && (client.IsErrConnectionFailed(err) || errdefs.IsUnavailable(err) || errors.Is(err, io.ErrUnexpectedEOF))
}

// ServerError reports whether the engine answered err with a server error
// (HTTP 5xx): the engine's own trouble (it fails calls so while it shuts
// down) or a failure of the container it was asked to start (a host port
// already taken). Not a refusal of a bad request, not "not found".
func ServerError(err error) bool {
	return err != nil && errdefs.IsInternal(err)
}

// Close releases the client's connections.
func (c *Client) Close() error { return c.api.Close() }

// EngineInfo describes the engine, for the driver's fingerprint.
type EngineInfo struct {
	Version        string
	APIVersion     string
	OS             string
	Arch           string
	DefaultRuntime string
	Runtimes       []string
	CgroupVersion  string
	CgroupDriver   string
	StorageDriver  string
}

// Info asks the engine who it is. An error means the engine is unreachable
// or broken.
func (c *Client) Info(ctx context.Context) (EngineInfo, error) {
	v, err := c.api.ServerVersion(ctx)
	if err != nil {
		return EngineInfo{}, fmt.Errorf("asking the docker engine its version: %w", err)
	}
	info, err := c.api.Info(ctx)
	if err != nil {
		return EngineInfo{}, fmt.Errorf("asking the docker engine for info: %w", err)
	}
	runtimes := make([]string, 0, len(info.Runtimes))
	for name := range info.Runtimes {
		runtimes = append(runtimes, name)
	}
	sort.Strings(runtimes)
	return EngineInfo{
		Version:        v.Version,
		APIVersion:     c.api.ClientVersion(),
		OS:             v.Os,
		Arch:           v.Arch,
		DefaultRuntime: info.DefaultRuntime,
		Runtimes:       runtimes,
		CgroupVersion:  info.CgroupVersion,
		CgroupDriver:   info.CgroupDriver,
		StorageDriver:  info.Driver,
	}, nil
}

// ImageExists reports whether ref is present in the engine's image store.
func (c *Client) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := c.api.ImageInspect(ctx, ref)
	if err == nil {
		return true, nil
	}
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	return false, fmt.Errorf("inspecting image %s: %w", ref, err)
}

// RegistryAuth are credentials for a registry.
type RegistryAuth struct {
	Username      string
	Password      string
	ServerAddress string
}

// PullProgress is one progress report of an image pull.
type PullProgress struct {
	// Status is the engine's message, e.g. "Downloading".
	Status string
	// Layer is the layer ID the status is about, if any.
	Layer string
	// Current and Total are bytes, when the engine reports them.
	Current, Total int64
}

// pullMessage is one JSON line of the engine's pull stream.
type pullMessage struct {
	Status         string `json:"status"`
	ID             string `json:"id"`
	Error          string `json:"error"`
	ProgressDetail struct {
		Current int64 `json:"current"`
		Total   int64 `json:"total"`
	} `json:"progressDetail"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// PullImage pulls ref, calling progress (if not nil) with each report of
// the engine. It returns when the pull is complete, failed, or ctx ended —
// the caller bounds the time a pull may take.
func (c *Client) PullImage(ctx context.Context, ref string, auth *RegistryAuth, progress func(PullProgress)) error {
	opts := image.PullOptions{}
	if auth != nil {
		enc, err := registry.EncodeAuthConfig(registry.AuthConfig{
			Username:      auth.Username,
			Password:      auth.Password,
			ServerAddress: auth.ServerAddress,
		})
		if err != nil {
			return fmt.Errorf("encoding registry credentials for %s: %w", ref, err)
		}
		opts.RegistryAuth = enc
	}
	rc, err := c.api.ImagePull(ctx, ref, opts)
	if err != nil {
		return fmt.Errorf("pulling image %s: %w", ref, err)
	}
	defer rc.Close()
	// Closing the body when ctx ends unblocks the decoder.
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	defer stop()
	dec := json.NewDecoder(bufio.NewReader(rc))
	for {
		var m pullMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("pulling image %s: %w", ref, ctx.Err())
			}
			return fmt.Errorf("pulling image %s: reading progress: %w", ref, err)
		}
		if m.Error != "" {
			return fmt.Errorf("pulling image %s: %s", ref, m.Error)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return fmt.Errorf("pulling image %s: %s", ref, m.ErrorDetail.Message)
		}
		if progress != nil {
			progress(PullProgress{Status: m.Status, Layer: m.ID, Current: m.ProgressDetail.Current, Total: m.ProgressDetail.Total})
		}
	}
}

// LoadImage loads an image tarball (the `docker save` format) into the
// engine, as `docker load` does.
func (c *Client) LoadImage(ctx context.Context, tarball io.Reader) error {
	resp, err := c.api.ImageLoad(ctx, tarball, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("loading image: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("loading image: reading response: %w", err)
	}
	// The engine reports a failed load inside a 200 response.
	dec := json.NewDecoder(strings.NewReader(string(body)))
	for {
		var m pullMessage
		if err := dec.Decode(&m); err != nil {
			break
		}
		if m.Error != "" {
			return fmt.Errorf("loading image: %s", m.Error)
		}
	}
	return nil
}

// RemoveImage removes an image (forcefully, with its untagged parents).
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	_, err := c.api.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("removing image %s: %w", ref, ErrNotFound)
		}
		return fmt.Errorf("removing image %s: %w", ref, err)
	}
	return nil
}

// PortMapping publishes a container port on the host.
type PortMapping struct {
	HostIP        string // empty: all interfaces
	HostPort      int    // 0: the engine chooses
	ContainerPort int
	Protocol      string // "tcp" (default) or "udp"
}

// Mount is a bind mount or a named volume.
type Mount struct {
	// Type is "bind" or "volume".
	Type     string
	Source   string
	Target   string
	ReadOnly bool
	// Propagation is a bind mount's propagation: "", "private",
	// "rprivate", "shared", "rshared", "slave" or "rslave".
	Propagation string
}

// Device exposes a host device in the container.
type Device struct {
	HostPath          string
	ContainerPath     string
	CgroupPermissions string // e.g. "rwm"
}

// ContainerSpec is everything needed to create a container.
type ContainerSpec struct {
	Name       string
	Image      string
	Entrypoint []string
	Cmd        []string
	Env        []string // KEY=value
	Labels     map[string]string
	WorkDir    string
	User       string
	// StopSignal is sent by StopContainer; it can only be set here (API 1.41).
	StopSignal  string
	Ports       []PortMapping
	Mounts      []Mount
	Binds       []string // docker-style "src:dst[:ro]"
	NetworkMode string
	// PidMode and IpcMode are the engine's ("host", "container:<id>", ...);
	// empty: the container's own namespace.
	PidMode     string
	IpcMode     string
	CapAdd      []string
	CapDrop     []string
	Devices     []Device
	Privileged  bool
	CPUShares   int64
	MemoryBytes int64
	// LogType and LogOptions are the container's log driver and its
	// options (json-file: max-size, max-file...); empty: the engine's
	// default driver.
	LogType    string
	LogOptions map[string]string
}

// CreateContainer creates (does not start) a container and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, spec ContainerSpec) (string, error) {
	exposed := nat.PortSet{}
	bindings := nat.PortMap{}
	for _, p := range spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		port, err := nat.NewPort(proto, strconv.Itoa(p.ContainerPort))
		if err != nil {
			return "", fmt.Errorf("creating container %s: port %d/%s: %w", spec.Name, p.ContainerPort, proto, err)
		}
		exposed[port] = struct{}{}
		hostPort := ""
		if p.HostPort != 0 {
			hostPort = strconv.Itoa(p.HostPort)
		}
		if p.HostIP != "" {
			if _, err := netip.ParseAddr(p.HostIP); err != nil {
				return "", fmt.Errorf("creating container %s: host_ip %q: %w", spec.Name, p.HostIP, err)
			}
		}
		bindings[port] = append(bindings[port], nat.PortBinding{HostIP: p.HostIP, HostPort: hostPort})
	}
	mounts := make([]mount.Mount, 0, len(spec.Mounts))
	for _, m := range spec.Mounts {
		typ := mount.TypeBind
		if m.Type == "volume" {
			typ = mount.TypeVolume
		}
		mm := mount.Mount{Type: typ, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly}
		if m.Propagation != "" && typ == mount.TypeBind {
			mm.BindOptions = &mount.BindOptions{Propagation: mount.Propagation(m.Propagation)}
		}
		mounts = append(mounts, mm)
	}
	cfg := &container.Config{
		Image:        spec.Image,
		Entrypoint:   spec.Entrypoint,
		Cmd:          spec.Cmd,
		Env:          spec.Env,
		Labels:       spec.Labels,
		WorkingDir:   spec.WorkDir,
		User:         spec.User,
		StopSignal:   spec.StopSignal,
		ExposedPorts: exposed,
	}
	host := &container.HostConfig{
		PortBindings: bindings,
		Mounts:       mounts,
		Binds:        spec.Binds,
		NetworkMode:  container.NetworkMode(spec.NetworkMode),
		PidMode:      container.PidMode(spec.PidMode),
		IpcMode:      container.IpcMode(spec.IpcMode),
		CapAdd:       spec.CapAdd,
		CapDrop:      spec.CapDrop,
		Privileged:   spec.Privileged,
		Resources: container.Resources{
			CPUShares: spec.CPUShares,
			Memory:    spec.MemoryBytes,
		},
	}
	for _, d := range spec.Devices {
		host.Resources.Devices = append(host.Resources.Devices, container.DeviceMapping{
			PathOnHost: d.HostPath, PathInContainer: d.ContainerPath, CgroupPermissions: d.CgroupPermissions})
	}
	if spec.MemoryBytes > 0 {
		// No swap on top of the limit: the limit is the limit, and an
		// allocation beyond it is an OOM kill rather than a slow swap.
		host.Resources.MemorySwap = spec.MemoryBytes
	}
	if spec.LogType != "" {
		host.LogConfig = container.LogConfig{Type: spec.LogType, Config: spec.LogOptions}
	}
	resp, err := c.api.ContainerCreate(ctx, cfg, host, nil, nil, spec.Name)
	if err != nil {
		return "", fmt.Errorf("creating container %s: %w", spec.Name, err)
	}
	return resp.ID, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	if err := c.api.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("starting container %s: %w", short(id), notFound(err))
	}
	return nil
}

// StopContainer sends the container's stop signal (set at creation), waits
// up to timeout (rounded up to whole seconds, the API's unit), then kills it.
func (c *Client) StopContainer(ctx context.Context, id string, timeout time.Duration) error {
	secs := int((timeout + time.Second - 1) / time.Second)
	if secs < 0 {
		secs = 0
	}
	if err := c.api.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}); err != nil {
		return fmt.Errorf("stopping container %s: %w", short(id), notFound(err))
	}
	return nil
}

// KillContainer sends signal (e.g. "SIGHUP") to the container's main process.
func (c *Client) KillContainer(ctx context.Context, id, signal string) error {
	if err := c.api.ContainerKill(ctx, id, signal); err != nil {
		return fmt.Errorf("sending %s to container %s: %w", signal, short(id), notFound(err))
	}
	return nil
}

// RemoveContainer removes a container; force kills it first if it runs.
// Anonymous volumes go with it.
func (c *Client) RemoveContainer(ctx context.Context, id string, force bool) error {
	if err := c.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: force, RemoveVolumes: true}); err != nil {
		return fmt.Errorf("removing container %s: %w", short(id), notFound(err))
	}
	return nil
}

// ContainerState is what InspectContainer reports.
type ContainerState struct {
	ID         string
	Name       string
	Image      string
	Labels     map[string]string
	Status     string // created, running, paused, restarting, removing, exited, dead
	Running    bool
	ExitCode   int
	OOMKilled  bool
	Error      string
	Pid        int
	StartedAt  time.Time
	FinishedAt time.Time
	// HostPorts maps "80/tcp" to the host ports it is published on.
	HostPorts map[string][]string
	// LogType and LogOptions are the container's log driver and options.
	LogType    string
	LogOptions map[string]string
}

// InspectContainer reports a container's state; ErrNotFound (wrapped) if
// it does not exist.
func (c *Client) InspectContainer(ctx context.Context, id string) (ContainerState, error) {
	r, err := c.api.ContainerInspect(ctx, id)
	if err != nil {
		return ContainerState{}, fmt.Errorf("inspecting container %s: %w", short(id), notFound(err))
	}
	st := ContainerState{
		ID:        r.ID,
		Name:      strings.TrimPrefix(r.Name, "/"),
		HostPorts: map[string][]string{},
	}
	if r.Config != nil {
		st.Image = r.Config.Image
		st.Labels = r.Config.Labels
	}
	if r.State != nil {
		st.Status = string(r.State.Status)
		st.Running = r.State.Running
		st.ExitCode = r.State.ExitCode
		st.OOMKilled = r.State.OOMKilled
		st.Error = r.State.Error
		st.Pid = r.State.Pid
		st.StartedAt = parseEngineTime(r.State.StartedAt)
		st.FinishedAt = parseEngineTime(r.State.FinishedAt)
	}
	if r.HostConfig != nil {
		st.LogType = r.HostConfig.LogConfig.Type
		st.LogOptions = r.HostConfig.LogConfig.Config
	}
	if r.NetworkSettings != nil {
		for port, bs := range r.NetworkSettings.Ports {
			for _, b := range bs {
				st.HostPorts[string(port)] = append(st.HostPorts[string(port)], b.HostPort)
			}
		}
	}
	return st, nil
}

// ContainerSummary is one row of ListContainers.
type ContainerSummary struct {
	ID     string
	Names  []string
	Image  string
	Labels map[string]string
	State  string
}

// ListContainers lists all containers (running or not) that carry every
// label of labels (a value "" matches any value of that label).
func (c *Client) ListContainers(ctx context.Context, labels map[string]string) ([]ContainerSummary, error) {
	args := filters.NewArgs()
	for k, v := range labels {
		if v == "" {
			args.Add("label", k)
		} else {
			args.Add("label", k+"="+v)
		}
	}
	list, err := c.api.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	out := make([]ContainerSummary, 0, len(list))
	for _, s := range list {
		names := make([]string, 0, len(s.Names))
		for _, n := range s.Names {
			names = append(names, strings.TrimPrefix(n, "/"))
		}
		out = append(out, ContainerSummary{ID: s.ID, Names: names, Image: s.Image, Labels: s.Labels, State: string(s.State)})
	}
	return out, nil
}

// WaitContainer blocks until the container is not running and returns its
// exit code. It returns at once for a container that already exited.
func (c *Client) WaitContainer(ctx context.Context, id string) (int64, error) {
	okc, errc := c.api.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case r := <-okc:
		if r.Error != nil && r.Error.Message != "" {
			return r.StatusCode, fmt.Errorf("waiting for container %s: %s", short(id), r.Error.Message)
		}
		return r.StatusCode, nil
	case err := <-errc:
		return 0, fmt.Errorf("waiting for container %s: %w", short(id), notFound(err))
	}
}

// Stats is one resource usage sample of a container.
type Stats struct {
	Read time.Time
	// CPUTotal and SystemTotal are cumulative nanoseconds: CPU time of the
	// container and of the whole host; OnlineCPUs the host's CPU count.
	CPUTotal    uint64
	SystemTotal uint64
	OnlineCPUs  uint32
	// PreCPUTotal and PreSystemTotal are the previous sample's, when the
	// engine includes it (zero otherwise).
	PreCPUTotal    uint64
	PreSystemTotal uint64
	// MemoryBytes is the working set: usage less inactive page cache, as
	// `docker stats` reports it.
	MemoryBytes uint64
	MemoryLimit uint64
}

// CPUPercent is the CPU use between prev and s, in percent of one CPU
// (200% is two CPUs busy), as `docker stats` computes it. With prev nil it
// uses the engine's own previous sample, if any; 0 when unknown.
func (s Stats) CPUPercent(prev *Stats) float64 {
	preCPU, preSys := s.PreCPUTotal, s.PreSystemTotal
	if prev != nil {
		preCPU, preSys = prev.CPUTotal, prev.SystemTotal
	}
	if preSys == 0 || s.SystemTotal <= preSys || s.CPUTotal < preCPU {
		return 0
	}
	cpus := float64(s.OnlineCPUs)
	if cpus == 0 {
		cpus = 1
	}
	return float64(s.CPUTotal-preCPU) / float64(s.SystemTotal-preSys) * cpus * 100
}

// ContainerStats takes one sample of a container's resource usage without
// waiting for the engine's second sample (so the engine's "previous" values
// are usually empty: compute CPU from two calls with CPUPercent).
func (c *Client) ContainerStats(ctx context.Context, id string) (Stats, error) {
	r, err := c.api.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return Stats{}, fmt.Errorf("reading stats of container %s: %w", short(id), notFound(err))
	}
	defer r.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
		return Stats{}, fmt.Errorf("decoding stats of container %s: %w", short(id), err)
	}
	mem := s.MemoryStats.Usage
	// cgroup v1 reports inactive file cache as total_inactive_file, v2 as
	// inactive_file; `docker stats` subtracts it.
	for _, key := range []string{"total_inactive_file", "inactive_file"} {
		if v, ok := s.MemoryStats.Stats[key]; ok && v < mem {
			mem -= v
			break
		}
	}
	return Stats{
		Read:           s.Read,
		CPUTotal:       s.CPUStats.CPUUsage.TotalUsage,
		SystemTotal:    s.CPUStats.SystemUsage,
		OnlineCPUs:     s.CPUStats.OnlineCPUs,
		PreCPUTotal:    s.PreCPUStats.CPUUsage.TotalUsage,
		PreSystemTotal: s.PreCPUStats.SystemUsage,
		MemoryBytes:    mem,
		MemoryLimit:    s.MemoryStats.Limit,
	}, nil
}

// ContainerLogs opens the container's multiplexed log stream (stdout and
// stderr, each entry prefixed by its RFC 3339 timestamp) from since (zero:
// from the start), following it until the container stops when follow is
// set. Demultiplex it with StreamLogs.
func (c *Client) ContainerLogs(ctx context.Context, id string, since time.Time, follow bool) (io.ReadCloser, error) {
	opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow, Timestamps: true}
	if !since.IsZero() {
		opts.Since = fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond())
	}
	rc, err := c.api.ContainerLogs(ctx, id, opts)
	if err != nil {
		return nil, fmt.Errorf("reading logs of container %s: %w", short(id), notFound(err))
	}
	return rc, nil
}

func parseEngineTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// notFound maps the engine's not-found errors onto ErrNotFound, keeping the
// engine's message.
func notFound(err error) error {
	if err != nil && errdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return err
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

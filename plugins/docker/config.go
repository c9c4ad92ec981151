package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	engine "github.com/hivelet/hivelet/runtime/docker"
	"github.com/hivelet/hivelet/sdk/driver"
)

// Ownership labels: every container the driver creates carries all four,
// and the driver never acts on a container that does not.
const (
	LabelAllocID = "hivelet.alloc_id"
	LabelTask    = "hivelet.task"
	LabelJob     = "hivelet.job"
	LabelNodeID  = "hivelet.node_id"
)

// TaskConfig is a docker task's config block, as the job file writes it.
type TaskConfig struct {
	Image      string            `json:"image"`
	Command    string            `json:"command"`
	Args       []string          `json:"args"`
	Entrypoint []string          `json:"entrypoint"`
	Env        map[string]string `json:"env"`
	Labels     map[string]string `json:"labels"`
	Ports      []PortConfig      `json:"ports"`
	Mount      []MountConfig     `json:"mount"`
	Volumes    []string          `json:"volumes"`
	// NetworkMode is passed to the engine: "bridge" (default), "host", "none"...
	NetworkMode string `json:"network_mode"`
	WorkDir     string `json:"work_dir"`
	User        string `json:"user"`
	Privileged  bool   `json:"privileged"`
	ForcePull   bool   `json:"force_pull"`
	// ImagePullTimeout bounds a pull ("5m"); empty: the driver's default.
	ImagePullTimeout string       `json:"image_pull_timeout"`
	Auth             []AuthConfig `json:"auth"`
}

// PortConfig publishes container port Container on the host.
type PortConfig struct {
	Host      int    `json:"host"`
	Container int    `json:"container"`
	Protocol  string `json:"protocol"`
	HostIP    string `json:"host_ip"`
}

// MountConfig is one `mount` block: a bind mount or a named volume.
type MountConfig struct {
	Type     string `json:"type"`
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readonly"`
}

// AuthConfig holds registry credentials for the task's image.
type AuthConfig struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	ServerAddress string `json:"server_address"`
}

// Schema is the docker driver's config schema.
func Schema() *driver.Schema {
	str := func(desc string) *driver.Field { return &driver.Field{Type: driver.TypeString, Description: desc} }
	return &driver.Schema{Fields: map[string]*driver.Field{
		"image":      {Type: driver.TypeString, Required: true, Description: "image reference; used from the local store when present, pulled otherwise"},
		"command":    str("command run in the container (the first element of its CMD)"),
		"args":       {Type: driver.TypeStringList, Description: "arguments after command"},
		"entrypoint": {Type: driver.TypeStringList, Description: "overrides the image's entrypoint"},
		"env":        {Type: driver.TypeStringMap, Description: "environment, on top of the task's env"},
		"labels":     {Type: driver.TypeStringMap, Description: "container labels (hivelet.* is reserved)"},
		"ports": {Type: driver.TypeObjectList, Description: "host port mappings: [{host = 8080, container = 80, protocol = \"tcp\", host_ip = \"127.0.0.1\"}]",
			Elem: &driver.Schema{Fields: map[string]*driver.Field{
				"host":      {Type: driver.TypeNumber, Description: "host port; 0 or absent lets the engine choose"},
				"container": {Type: driver.TypeNumber, Required: true, Description: "container port"},
				"protocol":  str("tcp (default) or udp"),
				"host_ip":   str("host address to bind; absent: all addresses"),
			}}},
		"mount": {Type: driver.TypeObjectList, Description: "mount blocks: bind mounts and named volumes",
			Elem: &driver.Schema{Fields: map[string]*driver.Field{
				"type":     str("bind (default) or volume"),
				"source":   {Type: driver.TypeString, Required: true, Description: "absolute host path (bind) or volume name"},
				"target":   {Type: driver.TypeString, Required: true, Description: "absolute path in the container"},
				"readonly": {Type: driver.TypeBool, Description: "mount read-only"},
			}}},
		"volumes":            {Type: driver.TypeStringList, Description: "docker-style \"source:target[:ro]\"; an absolute source is a bind mount, a name a named volume"},
		"network_mode":       str("engine network mode: bridge (default), host, none, container:<id>, or a network name"),
		"work_dir":           str("working directory in the container"),
		"user":               str("user in the container; default the task's user"),
		"privileged":         {Type: driver.TypeBool, Description: "privileged container; refused unless the agent allows it"},
		"force_pull":         {Type: driver.TypeBool, Description: "pull even when the image is present"},
		"image_pull_timeout": str("bound on a pull, e.g. \"5m\""),
		"auth": {Type: driver.TypeObjectList, Description: "one auth block: registry credentials",
			Elem: &driver.Schema{Fields: map[string]*driver.Field{
				"username":       str("registry user"),
				"password":       str("registry password"),
				"server_address": str("registry address"),
			}}},
	}}
}

// plan is what StartTask does, computed purely from the task and the
// driver's options.
type plan struct {
	spec        engine.ContainerSpec
	forcePull   bool
	pullTimeout time.Duration
	auth        *engine.RegistryAuth
}

// planOptions are the driver settings that shape a plan.
type planOptions struct {
	allowPrivileged bool
	pullTimeout     time.Duration
	engineLogSize   string
	engineLogFiles  int
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// ContainerName is the name of a task's container: hivelet-<task>-<alloc_id>
// with characters the engine refuses replaced by "_".
func ContainerName(task, allocID string) string {
	return "hivelet-" + nameUnsafe.ReplaceAllString(task, "_") + "-" + nameUnsafe.ReplaceAllString(allocID, "_")
}

// makePlan validates a task and turns it into a container spec. Every
// problem is reported as a field of a *driver.ConfigError.
func makePlan(tc *driver.TaskConfig, opts planOptions) (*plan, error) {
	if err := driver.ValidateConfig(Schema(), tc.Config); err != nil {
		return nil, err
	}
	var c TaskConfig
	if err := driver.DecodeConfig(tc.Config, &c); err != nil {
		// Types were checked; what is left is e.g. a fractional port.
		path := "config"
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			path = te.Field
		}
		return nil, &driver.ConfigError{Fields: []*driver.FieldError{{Path: path, Message: "want a whole number: " + err.Error()}}}
	}
	var errs []*driver.FieldError
	bad := func(path, format string, args ...any) {
		errs = append(errs, &driver.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if strings.TrimSpace(c.Image) == "" {
		bad("image", "must not be empty")
	}
	if tc.AllocID == "" || tc.TaskName == "" {
		bad("task", "the host must give an alloc ID and a task name (ownership labels)")
	}
	p := &plan{forcePull: c.ForcePull, pullTimeout: opts.pullTimeout}
	if c.ImagePullTimeout != "" {
		d, err := time.ParseDuration(c.ImagePullTimeout)
		if err != nil || d <= 0 {
			bad("image_pull_timeout", "want a positive duration such as \"5m\", got %q", c.ImagePullTimeout)
		} else {
			p.pullTimeout = d
		}
	}
	if c.Privileged && !opts.allowPrivileged {
		bad("privileged", "privileged containers are not allowed on this node (the agent's docker plugin config must allow them)")
	}
	switch len(c.Auth) {
	case 0:
	case 1:
		a := c.Auth[0]
		p.auth = &engine.RegistryAuth{Username: a.Username, Password: a.Password, ServerAddress: a.ServerAddress}
	default:
		bad("auth", "at most one auth block, got %d", len(c.Auth))
	}

	labels := map[string]string{}
	for k, v := range c.Labels {
		if strings.HasPrefix(k, "hivelet.") {
			bad("labels."+k, "the hivelet. label prefix is reserved for ownership labels")
			continue
		}
		labels[k] = v
	}
	labels[LabelAllocID] = tc.AllocID
	labels[LabelTask] = tc.TaskName
	labels[LabelJob] = tc.JobID
	labels[LabelNodeID] = tc.NodeID

	env := map[string]string{}
	for k, v := range tc.Env {
		env[k] = v
	}
	for k, v := range c.Env {
		env[k] = v
	}
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)

	var cmd []string
	if c.Command != "" {
		cmd = append(cmd, c.Command)
	}
	cmd = append(cmd, c.Args...)

	var ports []engine.PortMapping
	for i, pc := range c.Ports {
		path := "ports[" + strconv.Itoa(i) + "]"
		if pc.Container < 1 || pc.Container > 65535 {
			bad(path+".container", "port %d is out of 1..65535", pc.Container)
		}
		if pc.Host < 0 || pc.Host > 65535 {
			bad(path+".host", "port %d is out of 0..65535", pc.Host)
		}
		proto := strings.ToLower(pc.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		if proto != "tcp" && proto != "udp" {
			bad(path+".protocol", "want tcp or udp, got %q", pc.Protocol)
		}
		ports = append(ports, engine.PortMapping{HostIP: pc.HostIP, HostPort: pc.Host, ContainerPort: pc.Container, Protocol: proto})
	}

	var mounts []engine.Mount
	for i, m := range c.Mount {
		path := "mount[" + strconv.Itoa(i) + "]"
		typ := m.Type
		if typ == "" {
			typ = "bind"
		}
		switch typ {
		case "bind":
			if !filepath.IsAbs(m.Source) {
				bad(path+".source", "a bind mount's source must be an absolute host path, got %q", m.Source)
			}
		case "volume":
			if m.Source == "" || strings.Contains(m.Source, "/") {
				bad(path+".source", "a volume's source is a volume name, got %q", m.Source)
			}
		default:
			bad(path+".type", "want bind or volume, got %q", m.Type)
		}
		if !strings.HasPrefix(m.Target, "/") {
			bad(path+".target", "must be an absolute path in the container, got %q", m.Target)
		}
		mounts = append(mounts, engine.Mount{Type: typ, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	for i, v := range c.Volumes {
		parts := strings.Split(v, ":")
		ok := (len(parts) == 2 || (len(parts) == 3 && (parts[2] == "ro" || parts[2] == "rw"))) &&
			parts[0] != "" && strings.HasPrefix(parts[1], "/")
		if !ok {
			bad("volumes["+strconv.Itoa(i)+"]", "want \"source:target[:ro|rw]\" with an absolute target, got %q", v)
		}
	}

	user := c.User
	if user == "" {
		user = tc.User
	}
	var shares int64
	if tc.Resources.CPU > 0 {
		// One MHz, one share (as Nomad does); the engine's minimum is 2.
		shares = max(int64(tc.Resources.CPU), 2)
	}

	if len(errs) > 0 {
		sort.Slice(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path })
		return nil, &driver.ConfigError{Fields: errs}
	}
	p.spec = engine.ContainerSpec{
		Name:        ContainerName(tc.TaskName, tc.AllocID),
		Image:       c.Image,
		Entrypoint:  c.Entrypoint,
		Cmd:         cmd,
		Env:         envList,
		Labels:      labels,
		WorkDir:     c.WorkDir,
		User:        user,
		StopSignal:  tc.KillSignal,
		Ports:       ports,
		Mounts:      mounts,
		Binds:       c.Volumes,
		NetworkMode: c.NetworkMode,
		Privileged:  c.Privileged,
		CPUShares:   shares,
		MemoryBytes: int64(tc.Resources.MemoryMB) << 20,
		LogMaxSize:  opts.engineLogSize,
		LogMaxFiles: opts.engineLogFiles,
	}
	return p, nil
}

// owns reports whether a container's labels say it is this task's.
func owns(labels map[string]string, allocID, task string) bool {
	return labels != nil && labels[LabelAllocID] == allocID && labels[LabelTask] == task && allocID != "" && task != ""
}

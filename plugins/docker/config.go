package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	// Ports names port labels of the group's network block (Nomad's form):
	// each is published on the node's address, the allocated port mapped
	// to the label's `to` (else the same number) in the container.
	Ports []string `json:"ports"`
	// PortMap is the older docker syntax (port_map { label = 80 }): a
	// label's container port, over its `to`.
	PortMap stringMap `json:"port_map"`
	// Publish maps host ports to container ports directly.
	Publish []PortConfig  `json:"publish"`
	Mount   []MountConfig `json:"mount"`
	Volumes []string      `json:"volumes"`
	// NetworkMode is passed to the engine: "bridge" (default), "host", "none"...
	NetworkMode string `json:"network_mode"`
	// PidMode and IpcMode: "host" shares the node's namespace.
	PidMode    string         `json:"pid_mode"`
	IpcMode    string         `json:"ipc_mode"`
	CapAdd     []string       `json:"cap_add"`
	CapDrop    []string       `json:"cap_drop"`
	Devices    []DeviceConfig `json:"devices"`
	WorkDir    string         `json:"work_dir"`
	User       string         `json:"user"`
	Privileged bool           `json:"privileged"`
	ForcePull  bool           `json:"force_pull"`
	// ImagePullTimeout bounds a pull ("5m"); empty: the driver's default.
	ImagePullTimeout string       `json:"image_pull_timeout"`
	Auth             []AuthConfig `json:"auth"`
	// Logging is at most one logging block: the engine's log driver for
	// the container and its options, passed to the engine as given.
	Logging []LoggingConfig `json:"logging"`
}

// LoggingConfig is the logging block: the engine's log driver (type,
// default json-file) and its options (config). The driver reads a task's
// output back through the engine, which every log driver allows since
// Docker 20.10 (dual logging), so alloc logs keeps working.
type LoggingConfig struct {
	Type   string    `json:"type"`
	Config stringMap `json:"config"`
}

// stringMap decodes a map of strings written as an attribute (an object)
// or as a block (a list of one object).
type stringMap map[string]string

func (m *stringMap) UnmarshalJSON(b []byte) error {
	var list []map[string]string
	if json.Unmarshal(b, &list) == nil {
		if len(list) > 1 {
			return fmt.Errorf("a map written %d times", len(list))
		}
		if len(list) == 1 {
			*m = list[0]
		}
		return nil
	}
	var one map[string]string
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	*m = one
	return nil
}

// PortConfig publishes container port Container on the host.
type PortConfig struct {
	Host      int    `json:"host"`
	Container int    `json:"container"`
	Protocol  string `json:"protocol"`
	HostIP    string `json:"host_ip"`
}

// DeviceConfig exposes a host device in the container.
type DeviceConfig struct {
	HostPath          string `json:"host_path"`
	ContainerPath     string `json:"container_path"`
	CgroupPermissions string `json:"cgroup_permissions"`
}

// MountConfig is one `mount` block: a bind mount or a named volume.
type MountConfig struct {
	Type     string `json:"type"`
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readonly"`
	// BindOptions is at most one bind_options block: a bind mount's
	// propagation.
	BindOptions []BindOptions `json:"bind_options"`
}

// BindOptions is a bind mount's bind_options block.
type BindOptions struct {
	Propagation string `json:"propagation"`
}

// propagations are the bind propagation modes the engine takes.
var propagations = []string{"private", "rprivate", "shared", "rshared", "slave", "rslave"}

// mountPropagation is a volume_mount's propagation_mode as the engine's
// bind propagation, as Nomad's docker driver maps it ("": the engine's
// default, rprivate).
var mountPropagation = map[string]string{"": "", "private": "private", "host-to-task": "rslave", "bidirectional": "rshared"}

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
		"ports":      {Type: driver.TypeStringList, Description: "port labels of the group's network block to publish: [\"http\"] (a host:container mapping is written publish { host = 8080, container = 80 })"},
		"port_map":   {Type: driver.TypeStringMap, Description: "the older docker syntax, port_map { http = 80 }: each label of the group's network published, its node port mapped to this container port"},
		"publish": {Type: driver.TypeObjectList, Description: "host port mappings: [{host = 8080, container = 80, protocol = \"tcp\", host_ip = \"127.0.0.1\"}]",
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
				"bind_options": {Type: driver.TypeObjectList, Description: "one block: a bind mount's options, bind_options { propagation = \"rslave\" }",
					Elem: &driver.Schema{Fields: map[string]*driver.Field{
						"propagation": str("private, rprivate, shared, rshared, slave or rslave (default: the engine's, rprivate)"),
					}}},
			}}},
		"volumes":      {Type: driver.TypeStringList, Description: "docker-style \"source:target[:ro]\"; an absolute source is a bind mount, a name a named volume"},
		"network_mode": str("engine network mode: bridge (default), host, none, container:<id>, or a network name"),
		"pid_mode":     str("PID namespace: host shares the node's (default: the container's own)"),
		"ipc_mode":     str("IPC namespace: host, shareable, private, none or container:<id> (default: the engine's)"),
		"cap_add":      {Type: driver.TypeStringList, Description: "Linux capabilities to add; each must be allowed by the agent (HIVELET_DOCKER_ALLOW_CAPS)"},
		"cap_drop":     {Type: driver.TypeStringList, Description: "Linux capabilities to drop (\"all\" drops every one)"},
		"devices": {Type: driver.TypeObjectList, Description: "host devices: [{host_path = \"/dev/fuse\", container_path = \"/dev/fuse\", cgroup_permissions = \"rwm\"}]",
			Elem: &driver.Schema{Fields: map[string]*driver.Field{
				"host_path":          {Type: driver.TypeString, Required: true, Description: "absolute path of the device on the node"},
				"container_path":     str("path in the container; default host_path"),
				"cgroup_permissions": str("r, w and m (mknod), default rwm"),
			}}},
		"work_dir":           str("working directory in the container"),
		"user":               str("user in the container; default the task's user"),
		"privileged":         {Type: driver.TypeBool, Description: "privileged container; refused unless the agent allows it"},
		"force_pull":         {Type: driver.TypeBool, Description: "pull even when the image is present"},
		"image_pull_timeout": str("bound on a pull, e.g. \"5m\""),
		"logging": {Type: driver.TypeObjectList, Description: "one logging block: the engine's log driver and its options, e.g. logging { type = \"json-file\" config { max-size = \"10m\" } }",
			Elem: &driver.Schema{Fields: map[string]*driver.Field{
				"type":   str("the engine's log driver: json-file (default), local, journald, syslog, ... (the engine refuses one it lacks)"),
				"config": {Type: driver.TypeStringMap, Description: "the log driver's options, passed to the engine as given (json-file: max-size, max-file, ...)"},
			}}},
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
	// allowCaps are the capabilities cap_add may name (lower case, no
	// CAP_ prefix); "all" allows any. Nil: DefaultAllowCaps.
	allowCaps      []string
	pullTimeout    time.Duration
	engineLogSize  string
	engineLogFiles int
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// ContainerName is the name of a task's container: hivelet-<task>-<alloc_id>
// with characters the engine refuses replaced by "_".
func ContainerName(task, allocID string) string {
	return "hivelet-" + nameUnsafe.ReplaceAllString(task, "_") + "-" + nameUnsafe.ReplaceAllString(allocID, "_")
}

// schemaPath writes a field path of encoding/json ("publish.0.container"
// from Go 1.27, "publish.container" before) as ValidateConfig writes
// paths: a list element by its index in brackets ("publish[0].container").
func schemaPath(p string) string {
	parts := strings.Split(p, ".")
	var b strings.Builder
	for i, part := range parts {
		if _, err := strconv.Atoi(part); err == nil && i > 0 {
			b.WriteString("[" + part + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
	}
	return b.String()
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
			path = schemaPath(te.Field)
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

	logType, logOpts := logConfig(c.Logging, opts, bad)

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

	labelsToPublish := c.Ports
	netMode := c.NetworkMode
	if tc.NetworkMode == "bridge" {
		// Nomad's bridge mode: the task has a network of its own and every
		// port of the allocation is mapped into it, named in config or not.
		switch netMode {
		case "", "bridge":
			netMode = "bridge"
		default:
			bad("network_mode", "the group's network is in bridge mode, which gives the task docker's bridge network; network_mode %q contradicts it (drop it, or use the group's mode = \"host\")", netMode)
		}
		labelsToPublish = bridgeLabels(c.Ports, tc.Env)
	}
	// port_map (the older docker syntax): each label it names is
	// published too, into the container port it gives.
	for _, label := range slices.Sorted(maps.Keys(c.PortMap)) {
		if !slices.Contains(labelsToPublish, label) {
			labelsToPublish = append(labelsToPublish, label)
		}
	}
	var ports []engine.PortMapping
	for i, label := range labelsToPublish {
		field := "ports[" + strconv.Itoa(i) + "]"
		if _, mapped := c.PortMap[label]; mapped && !slices.Contains(c.Ports, label) {
			field = "port_map." + label
		}
		pm, err := labelPorts(label, tc.Env)
		if err != nil {
			bad(field, "%v", err)
			continue
		}
		if to, ok := c.PortMap[label]; ok {
			n, err := strconv.Atoi(strings.TrimSpace(to))
			if err != nil || n < 1 || n > 65535 {
				bad("port_map."+label, "want a container port 1..65535, got %q", to)
				continue
			}
			for j := range pm {
				pm[j].ContainerPort = n
			}
		}
		// With the node's own network the task binds the port itself:
		// there is nothing to publish.
		if netMode != "host" {
			ports = append(ports, pm...)
		}
	}
	for i, pc := range c.Publish {
		path := "publish[" + strconv.Itoa(i) + "]"
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
		em := engine.Mount{Type: typ, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly}
		switch len(m.BindOptions) {
		case 0:
		case 1:
			em.Propagation = m.BindOptions[0].Propagation
			if typ != "bind" {
				bad(path+".bind_options", "bind_options apply to a bind mount, this one is a %s", typ)
			} else if !slices.Contains(propagations, em.Propagation) {
				bad(path+".bind_options.propagation", "want one of %s, got %q", strings.Join(propagations, ", "), em.Propagation)
			}
		default:
			bad(path+".bind_options", "at most one bind_options block, got %d", len(m.BindOptions))
		}
		mounts = append(mounts, em)
	}
	// The group's host volumes, by the task's volume_mount blocks (the
	// host resolved each to a directory of the node).
	for i, m := range tc.Mounts {
		path := "volume_mount[" + strconv.Itoa(i) + "]"
		if !filepath.IsAbs(m.HostPath) || !strings.HasPrefix(m.TaskPath, "/") {
			bad(path, "the host gave host path %q and task path %q: both must be absolute", m.HostPath, m.TaskPath)
			continue
		}
		prop, ok := mountPropagation[m.PropagationMode]
		if !ok {
			bad(path+".propagation_mode", "want private, host-to-task or bidirectional, got %q", m.PropagationMode)
		}
		mounts = append(mounts, engine.Mount{Type: "bind", Source: m.HostPath, Target: m.TaskPath, ReadOnly: m.ReadOnly, Propagation: prop})
	}
	for i, v := range c.Volumes {
		parts := strings.Split(v, ":")
		ok := (len(parts) == 2 || (len(parts) == 3 && volumeOptions(parts[2]))) &&
			parts[0] != "" && strings.HasPrefix(parts[1], "/")
		if !ok {
			bad("volumes["+strconv.Itoa(i)+"]", "want \"source:target[:options]\" with an absolute target and options among ro, rw, z, Z, nocopy and the propagation modes (rslave, rshared...), got %q", v)
		}
	}

	for _, m := range []struct{ field, v string }{{"pid_mode", c.PidMode}, {"ipc_mode", c.IpcMode}} {
		if m.v == "" || m.v == "host" || strings.HasPrefix(m.v, "container:") ||
			(m.field == "ipc_mode" && slices.Contains([]string{"shareable", "private", "none"}, m.v)) {
			continue
		}
		bad(m.field, "want host or container:<name>%s, got %q", map[bool]string{true: ", shareable, private or none"}[m.field == "ipc_mode"], m.v)
	}
	allowCaps := opts.allowCaps
	if allowCaps == nil {
		allowCaps = DefaultAllowCaps
	}
	capAdd := normalizeCaps(c.CapAdd)
	for i, cp := range capAdd {
		if !slices.Contains(allowCaps, "all") && !slices.Contains(allowCaps, cp) {
			bad("cap_add["+strconv.Itoa(i)+"]", "capability %q is not allowed on this node (allowed: %s; the agent's %s widens it)", cp, strings.Join(allowCaps, ", "), EnvAllowCaps)
		}
	}
	var devices []engine.Device
	for i, dv := range c.Devices {
		path := "devices[" + strconv.Itoa(i) + "]"
		if !filepath.IsAbs(dv.HostPath) {
			bad(path+".host_path", "must be an absolute path on the node, got %q", dv.HostPath)
		}
		cp := dv.ContainerPath
		if cp == "" {
			cp = dv.HostPath
		} else if !filepath.IsAbs(cp) {
			bad(path+".container_path", "must be an absolute path in the container, got %q", cp)
		}
		perms := dv.CgroupPermissions
		if perms == "" {
			perms = "rwm"
		}
		if strings.Trim(perms, "rwm") != "" {
			bad(path+".cgroup_permissions", "want a combination of r, w and m, got %q", perms)
		}
		devices = append(devices, engine.Device{HostPath: dv.HostPath, ContainerPath: cp, CgroupPermissions: perms})
	}

	binds := append(append([]string(nil), c.Volumes...), taskDirBinds(tc, c)...)

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
		Binds:       binds,
		NetworkMode: netMode,
		PidMode:     c.PidMode,
		IpcMode:     c.IpcMode,
		CapAdd:      capAdd,
		CapDrop:     normalizeCaps(c.CapDrop),
		Devices:     devices,
		Privileged:  c.Privileged,
		CPUShares:   shares,
		MemoryBytes: int64(tc.Resources.MemoryMB) << 20,
		LogType:     logType,
		LogOptions:  logOpts,
	}
	return p, nil
}

// logConfig is the container's log driver and options: the task's logging
// block, else json-file bounded by the driver's settings. A json-file
// block keeps the driver's bounds for the options it does not set; any
// other log driver gets exactly the options written, since the engine
// refuses an option its driver does not know.
func logConfig(blocks []LoggingConfig, opts planOptions, bad func(path, format string, args ...any)) (string, map[string]string) {
	defaults := map[string]string{}
	if opts.engineLogSize != "" {
		defaults["max-size"] = opts.engineLogSize
	}
	if opts.engineLogFiles > 0 {
		defaults["max-file"] = strconv.Itoa(opts.engineLogFiles)
	}
	switch len(blocks) {
	case 0:
		if len(defaults) == 0 {
			return "", nil
		}
		return "json-file", defaults
	case 1:
	default:
		bad("logging", "at most one logging block, got %d", len(blocks))
		return "", nil
	}
	l := blocks[0]
	typ := strings.TrimSpace(l.Type)
	if typ == "" {
		typ = "json-file"
	}
	if typ == "none" && len(l.Config) > 0 {
		bad("logging.config", "the none log driver takes no options")
	}
	out := map[string]string{}
	if typ == "json-file" {
		maps.Copy(out, defaults)
	}
	maps.Copy(out, l.Config)
	if len(out) == 0 {
		out = nil
	}
	return typ, out
}

// taskDirBinds mounts the allocation's shared directory at /alloc and the
// task's local/ and secrets/ at /local and /secrets, as Nomad's docker
// driver does, so a task reads its rendered templates at /local/... It
// mounts only directories the host created (AllocDir/alloc,
// AllocDir/<task>/local, .../secrets) and never over a target the config
// mounts itself.
func taskDirBinds(tc *driver.TaskConfig, c TaskConfig) []string {
	if tc.AllocDir == "" || tc.TaskName == "" {
		return nil
	}
	taken := map[string]bool{}
	for _, v := range c.Volumes {
		if parts := strings.Split(v, ":"); len(parts) >= 2 {
			taken[filepath.Clean(parts[1])] = true
		}
	}
	for _, m := range c.Mount {
		taken[filepath.Clean(m.Target)] = true
	}
	for _, m := range tc.Mounts {
		taken[filepath.Clean(m.TaskPath)] = true
	}
	var out []string
	for _, d := range []struct{ src, target string }{
		{filepath.Join(tc.AllocDir, "alloc"), "/alloc"},
		{filepath.Join(tc.AllocDir, tc.TaskName, "local"), "/local"},
		{filepath.Join(tc.AllocDir, tc.TaskName, "secrets"), "/secrets"},
	} {
		if taken[d.target] {
			continue
		}
		if fi, err := os.Stat(d.src); err == nil && fi.IsDir() {
			out = append(out, d.src+":"+d.target)
		}
	}
	return out
}

// volumeOptions reports whether opts is a comma-separated list of the
// options the engine takes after a bind's target ("ro,rslave").
func volumeOptions(opts string) bool {
	known := []string{"ro", "rw", "z", "Z", "nocopy", "private", "rprivate", "shared", "rshared", "slave", "rslave"}
	for _, o := range strings.Split(opts, ",") {
		if !slices.Contains(known, o) {
			return false
		}
	}
	return true
}

// DefaultAllowCaps are the capabilities cap_add may name unless the agent
// says otherwise: Docker's default set (what a container has anyway),
// as Nomad's docker driver allows by default.
var DefaultAllowCaps = []string{"audit_write", "chown", "dac_override", "fowner", "fsetid", "kill", "mknod",
	"net_bind_service", "setfcap", "setgid", "setpcap", "setuid", "sys_chroot"}

// normalizeCaps writes capabilities as the allow list does: lower case,
// without the CAP_ prefix.
func normalizeCaps(caps []string) []string {
	var out []string
	for _, c := range caps {
		out = append(out, strings.TrimPrefix(strings.ToLower(strings.TrimSpace(c)), "cap_"))
	}
	return out
}

// labelPorts publishes one port label of the allocation. The host tells a
// driver the allocation's ports through the task's environment
// (NOMAD_HOST_PORT_<label>: the port on the node, NOMAD_PORT_<label>: the
// port in the task, NOMAD_HOST_IP_<label>: the address), which the node
// sets and the task's own env cannot override. Like Nomad, each label is
// published for tcp and udp.
func labelPorts(label string, env map[string]string) ([]engine.PortMapping, error) {
	ev := envLabel(label)
	hostPort, err := strconv.Atoi(env["NOMAD_HOST_PORT_"+ev])
	if err != nil {
		return nil, fmt.Errorf("no port labelled %q in the group's network block (add network { port %q {} } to the group)", label, label)
	}
	inTask, err := strconv.Atoi(env["NOMAD_PORT_"+ev])
	if err != nil {
		inTask = hostPort
	}
	ip := env["NOMAD_HOST_IP_"+ev]
	return []engine.PortMapping{
		{HostIP: ip, HostPort: hostPort, ContainerPort: inTask, Protocol: "tcp"},
		{HostIP: ip, HostPort: hostPort, ContainerPort: inTask, Protocol: "udp"},
	}, nil
}

// envLabel is a port label as the host writes it in the environment's
// variable names: '-' as '_' (sdk/driver, TaskConfig.Env).
func envLabel(label string) string { return strings.ReplaceAll(label, "-", "_") }

// bridgeLabels are the labels a bridge task publishes: the ones its config
// names, then every other port of the allocation (the host tells them in
// the env as NOMAD_HOST_PORT_<label>), sorted.
func bridgeLabels(named []string, env map[string]string) []string {
	out := append([]string(nil), named...)
	var rest []string
	for k := range env {
		if l, ok := strings.CutPrefix(k, "NOMAD_HOST_PORT_"); ok && !slices.ContainsFunc(named, func(n string) bool { return envLabel(n) == l }) {
			rest = append(rest, l)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// owns reports whether a container's labels say it is this task's.
func owns(labels map[string]string, allocID, task string) bool {
	return labels != nil && labels[LabelAllocID] == allocID && labels[LabelTask] == task && allocID != "" && task != ""
}

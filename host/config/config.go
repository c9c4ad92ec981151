// Package config owns the agent's configuration file: its schema (HCL, or
// the same structure as JSON), its defaults, and loading it with errors that
// name file:line:column. See docs/agent-config.md.
//
// Usage:
//
//	cfg, err := config.Load("agent.hcl")   // or config.Default() with no file
//	cfg.ApplyDefaults(dev)                 // fills dirs, addresses, prefix
//
// Invariants:
//   - Decoding is closed: an unknown attribute or block, a wrong type, or an
//     unparsable duration fails the load with its position.
//     TestAnUnknownAttributeFailsWithItsPosition.
//   - The embedded NATS server binds beyond loopback only when
//     nats.embedded.allow_non_loopback says so, and nats.replicas never
//     exceeds what the embedded server or its named cluster members can hold.
//     TestEmbeddedServerMistakesFailWithTheirPosition.
//   - Defaults are applied in one place (ApplyDefaults); Load never reads the
//     environment or the clock.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/hivelet/hivelet/host/ports"
)

// Agent is the agent configuration file.
type Agent struct {
	// NodeID is the node's ID; default a random one created at first
	// start and kept in <state_dir>/node-id. Set it when something must
	// know it in advance (per-node NATS permissions); it cannot change for
	// a state directory that already has one.
	NodeID string `hcl:"node_id,optional" json:"node_id,omitempty"`
	// Name of the node; default the hostname, then the node ID.
	Name       string            `hcl:"name,optional" json:"name,omitempty"`
	Datacenter string            `hcl:"datacenter,optional" json:"datacenter,omitempty"`
	NodePool   string            `hcl:"node_pool,optional" json:"node_pool,omitempty"`
	NodeClass  string            `hcl:"node_class,optional" json:"node_class,omitempty"`
	Meta       map[string]string `hcl:"meta,optional" json:"meta,omitempty"`
	// StateDir holds the node ID, the local state store, the embedded NATS
	// store. Default /var/lib/hivelet (dev: a temporary directory).
	StateDir string `hcl:"state_dir,optional" json:"state_dir,omitempty"`
	// AllocDir holds allocation directories; default <state_dir>/alloc.
	AllocDir string `hcl:"alloc_dir,optional" json:"alloc_dir,omitempty"`
	// PluginDir is searched for third-party driver plugins; default
	// <state_dir>/plugins.
	PluginDir string `hcl:"plugin_dir,optional" json:"plugin_dir,omitempty"`

	HTTP    *HTTP    `hcl:"http,block" json:"http,omitempty"`
	NATS    *NATS    `hcl:"nats,block" json:"nats,omitempty"`
	Docker  *Docker  `hcl:"docker,block" json:"docker,omitempty"`
	Network *Network `hcl:"network,block" json:"network,omitempty"`
	RawExec *RawExec `hcl:"raw_exec,block" json:"raw_exec,omitempty"`
	Exec    *Exec    `hcl:"exec,block" json:"exec,omitempty"`
	Policy  *Policy  `hcl:"policy,block" json:"policy,omitempty"`
	Plugins []Plugin `hcl:"plugin,block" json:"plugins,omitempty"`
	Client  *Client  `hcl:"client,block" json:"client,omitempty"`
}

// Client is Nomad's client block, for what a Nomad operator writes there:
// the node's host volumes and host networks. Both are advertised in the
// node's record (host_volumes, host_networks), and a group that needs one
// the node lacks does not run there.
type Client struct {
	HostVolumes  []HostVolume  `hcl:"host_volume,block" json:"host_volume,omitempty"`
	HostNetworks []HostNetwork `hcl:"host_network,block" json:"host_network,omitempty"`
}

// HostVolume offers a directory of the node to groups' volume blocks
// (type = "host", source = the label).
type HostVolume struct {
	Name string `hcl:"name,label" json:"name"`
	// Path is the directory on the node (required, absolute; it must exist
	// when a task mounts it).
	Path string `hcl:"path" json:"path"`
	// ReadOnly makes every mount of it read-only, whatever the job says.
	ReadOnly bool `hcl:"read_only,optional" json:"read_only,omitempty"`
}

// HostNetwork names a network of the node for ports' host_network: ports
// naming it are published on the node's address there, the first address
// of interface (when given) inside cidr (when given).
type HostNetwork struct {
	Name      string `hcl:"name,label" json:"name"`
	CIDR      string `hcl:"cidr,optional" json:"cidr,omitempty"`
	Interface string `hcl:"interface,optional" json:"interface,omitempty"`
}

// HTTP configures the local API.
type HTTP struct {
	// Address is host:port; default 127.0.0.1:4646. A non-loopback host
	// needs allow_non_loopback = true and a token.
	Address string `hcl:"address,optional" json:"address,omitempty"`
	// AllowNonLoopback makes binding beyond loopback an explicit choice.
	AllowNonLoopback bool `hcl:"allow_non_loopback,optional" json:"allow_non_loopback,omitempty"`
	// TokenFile holds the bearer token every write (and every read from
	// beyond loopback) must carry; default <state_dir>/http.token, created
	// at first start.
	TokenFile string `hcl:"token_file,optional" json:"token_file,omitempty"`
	// InsecureNoAuth serves writes without a token: anyone on the machine
	// can then run jobs on the fleet through this agent. Loopback only;
	// the agent warns at every start.
	InsecureNoAuth bool `hcl:"insecure_no_auth,optional" json:"insecure_no_auth,omitempty"`
	// EnableDebug serves Go's runtime profiles under /debug/pprof/ (heap,
	// goroutines, CPU, trace); every request there needs the token, from
	// loopback too (docs/api.md, "Debugging").
	EnableDebug bool `hcl:"enable_debug,optional" json:"enable_debug,omitempty"`
}

// NATS configures the connection to the fleet. No URLs: an embedded server.
type NATS struct {
	URLs         []string `hcl:"urls,optional" json:"urls,omitempty"`
	CredsFile    string   `hcl:"creds_file,optional" json:"creds_file,omitempty"`
	NKeySeedFile string   `hcl:"nkey_seed_file,optional" json:"nkey_seed_file,omitempty"`
	CAFile       string   `hcl:"ca_file,optional" json:"ca_file,omitempty"`
	CertFile     string   `hcl:"cert_file,optional" json:"cert_file,omitempty"`
	KeyFile      string   `hcl:"key_file,optional" json:"key_file,omitempty"`
	// TokenFile holds the token of an authenticated server: another
	// agent's embedded one (its <state_dir>/nats.token).
	TokenFile string `hcl:"token_file,optional" json:"token_file,omitempty"`
	// BucketPrefix names the buckets <prefix>_jobs...; default "hivelet".
	BucketPrefix string `hcl:"bucket_prefix,optional" json:"bucket_prefix,omitempty"`
	// Replicas of buckets the agent creates; default 1.
	Replicas int `hcl:"replicas,optional" json:"replicas,omitempty"`
	// RequestTimeout of every KV request; default "5s".
	RequestTimeout string `hcl:"request_timeout,optional" json:"request_timeout,omitempty"`
	// NodeTTL is the nodes bucket TTL (heartbeats every third); default "30s".
	NodeTTL string `hcl:"node_ttl,optional" json:"node_ttl,omitempty"`
	// EmbeddedPort is the embedded server's client port; default 4222.
	// Shorthand for embedded.port (setting both to different values fails).
	EmbeddedPort int `hcl:"embedded_port,optional" json:"embedded_port,omitempty"`
	// Embedded configures the agent's own NATS server (no urls): its client
	// listener, its JetStream store, and clustering with other agents.
	Embedded *EmbeddedServer `hcl:"embedded,block" json:"embedded,omitempty"`
}

// EmbeddedServer configures the NATS server an agent without nats.urls runs.
type EmbeddedServer struct {
	// Host the client listener binds; default 127.0.0.1. A non-loopback
	// host (including "0.0.0.0") needs allow_non_loopback = true.
	Host string `hcl:"host,optional" json:"host,omitempty"`
	// Port for clients; default 4222 (or nats.embedded_port).
	Port int `hcl:"port,optional" json:"port,omitempty"`
	// AllowNonLoopback makes binding a non-loopback client or cluster
	// address an explicit choice.
	AllowNonLoopback bool `hcl:"allow_non_loopback,optional" json:"allow_non_loopback,omitempty"`
	// InsecureNoAuth serves clients without credentials: anyone who can
	// reach the port can run commands through exec tasks. The agent warns
	// at every start. Default false: a token (<state_dir>/nats.token).
	InsecureNoAuth bool `hcl:"insecure_no_auth,optional" json:"insecure_no_auth,omitempty"`
	// StoreDir holds JetStream's files; default <state_dir>/nats.
	StoreDir string `hcl:"store_dir,optional" json:"store_dir,omitempty"`
	// ServerName must be unique in a cluster and stable across restarts of
	// the same store; default "hivelet-nats" alone, "hivelet-<node ID>"
	// clustered.
	ServerName string `hcl:"server_name,optional" json:"server_name,omitempty"`
	// Cluster makes the server a member of a JetStream cluster.
	Cluster *Cluster `hcl:"cluster,block" json:"cluster,omitempty"`
}

// Cluster routes an embedded server to the other members of its cluster.
type Cluster struct {
	// Name is the same on every member (required).
	Name string `hcl:"name,optional" json:"name,omitempty"`
	// Listen is host:port of this member's route listener (required).
	Listen string `hcl:"listen,optional" json:"listen,omitempty"`
	// Routes are host:port or nats-route://host:port of the members
	// (required; this one may be included: every member can share one list).
	Routes []string `hcl:"routes,optional" json:"routes,omitempty"`
}

// Docker configures the docker driver's host-side limits.
type Docker struct {
	AllowPrivileged bool `hcl:"allow_privileged,optional" json:"allow_privileged,omitempty"`
	// AllowCaps are the capabilities a task's cap_add may name ("all":
	// any); default Docker's own default set.
	AllowCaps []string `hcl:"allow_caps,optional" json:"allow_caps,omitempty"`
}

// RawExec turns on the raw_exec driver: tasks run as plain processes of the
// agent's user, not isolated. Off by default, as in Nomad.
type RawExec struct {
	Enabled bool `hcl:"enabled,optional" json:"enabled,omitempty"`
}

// Exec configures the exec driver. A task that names no user runs as
// "nobody" (when the agent is root), as with Nomad's exec driver: whoever
// may declare a job must not get root on every node by omission.
type Exec struct {
	// AllowRoot lets a task that says user = "root" run as root. Default
	// false: such a task fails to start, saying why.
	AllowRoot bool `hcl:"allow_root,optional" json:"allow_root,omitempty"`
}

// Network configures the ports this node gives its allocations (a group's
// network block).
type Network struct {
	// Address is the node address ports are published on and tasks see as
	// ${NOMAD_IP_<label>}; default 127.0.0.1 in dev mode, else the first
	// IPv4 address of an interface that is up and not loopback.
	Address string `hcl:"address,optional" json:"address,omitempty"`
	// MinDynamicPort and MaxDynamicPort bound the dynamic ports; default
	// 20000-32000 (Nomad's).
	MinDynamicPort int `hcl:"min_dynamic_port,optional" json:"min_dynamic_port,omitempty"`
	MaxDynamicPort int `hcl:"max_dynamic_port,optional" json:"max_dynamic_port,omitempty"`
	// ReservedPorts are never given out: "22,80,8000-8100".
	ReservedPorts string `hcl:"reserved_ports,optional" json:"reserved_ports,omitempty"`
}

// Policy configures the WASM policy engine.
type Policy struct {
	// Timeout of one policy call; default "250ms".
	Timeout string `hcl:"timeout,optional" json:"timeout,omitempty"`
	// MemoryLimitMB caps a module's memory; default 32.
	MemoryLimitMB int `hcl:"memory_limit_mb,optional" json:"memory_limit_mb,omitempty"`
	// CacheDir is wazero's compilation cache; default <state_dir>/policy-cache.
	CacheDir string `hcl:"cache_dir,optional" json:"cache_dir,omitempty"`
	// Pins maps a policy name to the SHA-256 its module must have.
	Pins map[string]string `hcl:"pins,optional" json:"pins,omitempty"`
}

// Plugin pins a third-party driver plugin.
type Plugin struct {
	Name   string `hcl:"name,label" json:"name"`
	SHA256 string `hcl:"sha256,optional" json:"sha256,omitempty"`
	// Path overrides <plugin_dir>/<name>.
	Path string `hcl:"path,optional" json:"path,omitempty"`
}

// Default returns the configuration of an agent started without a file.
func Default() *Agent { return &Agent{} }

// Error is a configuration error with its position.
type Error struct {
	Diags hcl.Diagnostics
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, d := range e.Diags {
		if i > 0 {
			b.WriteString("; ")
		}
		if d.Subject != nil {
			fmt.Fprintf(&b, "%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
		}
		b.WriteString(d.Summary)
		if d.Detail != "" {
			b.WriteString(": " + d.Detail)
		}
	}
	return b.String()
}

// Load reads and decodes a configuration file: HCL, or JSON when the name
// ends in .json.
func Load(path string) (*Agent, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading agent configuration: %w", err)
	}
	return Parse(src, path)
}

// Parse decodes a configuration from src; filename (its extension decides
// HCL or JSON) appears in errors.
func Parse(src []byte, filename string) (*Agent, error) {
	p := hclparse.NewParser()
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.EqualFold(filepath.Ext(filename), ".json") {
		f, diags = p.ParseJSON(src, filename)
	} else {
		f, diags = p.ParseHCL(src, filename)
	}
	if diags.HasErrors() {
		return nil, &Error{Diags: diags}
	}
	var a Agent
	if diags := gohcl.DecodeBody(f.Body, nil, &a); diags.HasErrors() {
		return nil, &Error{Diags: diags}
	}
	if err := a.validate(f, filename); err != nil {
		return nil, err
	}
	return &a, nil
}

// validate checks values gohcl cannot (durations, ranges) and reports them
// at the position of their attribute.
func (a *Agent) validate(f *hcl.File, filename string) error {
	var diags hcl.Diagnostics
	pos := func(block, attr string) *hcl.Range { return findAttr(f, block, attr, filename) }
	dur := func(block, attr, v string) {
		if v == "" {
			return
		}
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "invalid duration",
				Detail: fmt.Sprintf("%s.%s = %q: want a positive Go duration such as \"5s\"", block, attr, v), Subject: pos(block, attr)})
		}
	}
	if n := a.NATS; n != nil {
		dur("nats", "request_timeout", n.RequestTimeout)
		dur("nats", "node_ttl", n.NodeTTL)
		if d, err := time.ParseDuration(n.NodeTTL); err == nil && d > 0 && d < time.Second {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "node_ttl too short",
				Detail: fmt.Sprintf("nats.node_ttl = %q: JetStream's limit markers need at least 1s", n.NodeTTL), Subject: pos("nats", "node_ttl")})
		}
		if n.Replicas < 0 || n.Replicas > 5 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "invalid replicas",
				Detail: fmt.Sprintf("nats.replicas = %d: want 1 to 5", n.Replicas), Subject: pos("nats", "replicas")})
		}
		if n.EmbeddedPort < 0 || n.EmbeddedPort > 65535 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "invalid port",
				Detail: fmt.Sprintf("nats.embedded_port = %d", n.EmbeddedPort), Subject: pos("nats", "embedded_port")})
		}
		diags = append(diags, validateEmbedded(n, func(attr string, blocks ...string) *hcl.Range {
			return findPath(f, filename, attr, blocks...)
		})...)
		if (n.CertFile == "") != (n.KeyFile == "") {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "incomplete TLS client certificate",
				Detail: "nats.cert_file and nats.key_file go together", Subject: pos("nats", "cert_file")})
		}
	}
	if n := a.Network; n != nil {
		bad := func(attr, summary, detail string) {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: pos("network", attr)})
		}
		if n.Address != "" && net.ParseIP(n.Address) == nil {
			bad("address", "invalid address", fmt.Sprintf("network.address = %q: want an IP address of this node", n.Address))
		}
		for _, f := range []struct {
			attr string
			v    int
		}{{"min_dynamic_port", n.MinDynamicPort}, {"max_dynamic_port", n.MaxDynamicPort}} {
			if f.v < 0 || f.v > 65535 {
				bad(f.attr, "invalid port", fmt.Sprintf("network.%s = %d: want 1 to 65535", f.attr, f.v))
			}
		}
		lo, hi := n.dynamicRange()
		if lo > hi {
			bad("max_dynamic_port", "empty dynamic port range", fmt.Sprintf("network dynamic ports %d-%d: the lowest must come first", lo, hi))
		}
		if _, err := ports.ParseReserved(n.ReservedPorts); err != nil {
			bad("reserved_ports", "invalid reserved ports", "network.reserved_ports: "+err.Error())
		}
	}
	if p := a.Policy; p != nil {
		dur("policy", "timeout", p.Timeout)
		if p.MemoryLimitMB < 0 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "invalid memory limit",
				Detail: "policy.memory_limit_mb must be positive", Subject: pos("policy", "memory_limit_mb")})
		}
	}
	diags = append(diags, a.Client.validate(f, filename)...)
	for _, pl := range a.Plugins {
		if pl.SHA256 != "" && !isHex64(pl.SHA256) {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "invalid plugin pin",
				Detail: fmt.Sprintf("plugin %q: sha256 must be 64 hex digits", pl.Name), Subject: pos("plugin", "sha256")})
		}
	}
	if diags.HasErrors() {
		return &Error{Diags: diags}
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

// findAttr locates block.attr in the file for error positions (best effort:
// the first block of that type holding the attribute; else the file start).
func findAttr(f *hcl.File, block, attr, filename string) *hcl.Range {
	hdr := hcl.BlockHeaderSchema{Type: block}
	if block == "plugin" {
		hdr.LabelNames = []string{"name"}
	}
	content, _, _ := f.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{hdr}})
	if content != nil {
		for _, b := range content.Blocks {
			attrs, _ := b.Body.JustAttributes()
			if a, ok := attrs[attr]; ok {
				r := a.Range
				return &r
			}
		}
	}
	return &hcl.Range{Filename: filename, Start: hcl.Pos{Line: 1, Column: 1}}
}

// Resolved is the configuration with defaults applied and durations parsed:
// what the agent uses.
type Resolved struct {
	Agent
	HTTPAddr       string
	BucketPrefix   string
	Replicas       int
	RequestTimeout time.Duration
	NodeTTL        time.Duration
	EmbeddedPort   int
	// EmbeddedHost is the embedded server's client listen host; default
	// 127.0.0.1.
	EmbeddedHost string
	// EmbeddedAllowNonLoopback is nats.embedded.allow_non_loopback.
	EmbeddedAllowNonLoopback bool
	// EmbeddedNoAuth is nats.embedded.insecure_no_auth.
	EmbeddedNoAuth bool
	// EmbeddedStoreDir is the JetStream store; default <state_dir>/nats.
	EmbeddedStoreDir string
	// EmbeddedServerName is nats.embedded.server_name ("" = the default).
	EmbeddedServerName string
	// Cluster is the embedded server's cluster; nil for a single server.
	Cluster *ResolvedCluster
	// Embedded is true when no NATS URL is configured (or dev): the agent
	// runs its own NATS server.
	Embedded      bool
	PolicyTimeout time.Duration
	PolicyMemMB   int
	Privileged    bool
	// NetworkAddress is network.address; "" means: pick the default for a
	// non-dev agent (ports.DefaultAddress). Dev mode defaults to 127.0.0.1.
	NetworkAddress string
	// MinDynamicPort..MaxDynamicPort is the dynamic port range.
	MinDynamicPort, MaxDynamicPort int
	// ReservedPorts are network.reserved_ports, expanded.
	ReservedPorts []int
	// AllowCaps is docker.allow_caps as the docker plugin's
	// HIVELET_DOCKER_ALLOW_CAPS value ("" = the driver's default set).
	AllowCaps string
	// RawExec is raw_exec.enabled.
	RawExec bool
	// ExecAllowRoot is exec.allow_root.
	ExecAllowRoot bool

	// HTTPAllowNonLoopback, HTTPTokenFile (resolved: <state_dir>/http.token
	// by default), HTTPNoAuth and HTTPEnableDebug are the http block's.
	HTTPAllowNonLoopback bool
	HTTPTokenFile        string
	HTTPNoAuth           bool
	HTTPEnableDebug      bool
}

// dynamicRange is the configured dynamic range over the defaults.
func (n *Network) dynamicRange() (int, int) {
	lo, hi := ports.DefaultMinDynamic, ports.DefaultMaxDynamic
	if n != nil && n.MinDynamicPort > 0 {
		lo = n.MinDynamicPort
	}
	if n != nil && n.MaxDynamicPort > 0 {
		hi = n.MaxDynamicPort
	}
	return lo, hi
}

// Resolve applies the defaults. dev forces an embedded server; stateDir
// overrides the configured state directory when not empty (dev passes its
// temporary directory).
func (a *Agent) Resolve(dev bool, stateDir string) (*Resolved, error) {
	r := &Resolved{Agent: *a}
	if stateDir != "" {
		r.StateDir = stateDir
	}
	if r.StateDir == "" {
		r.StateDir = "/var/lib/hivelet"
	}
	if r.AllocDir == "" {
		r.AllocDir = filepath.Join(r.StateDir, "alloc")
	}
	if r.PluginDir == "" {
		r.PluginDir = filepath.Join(r.StateDir, "plugins")
	}
	if r.Datacenter == "" {
		r.Datacenter = "dc1"
	}
	if r.NodePool == "" {
		r.NodePool = "default"
	}
	if r.Meta == nil {
		r.Meta = map[string]string{}
	}
	r.HTTPAddr = "127.0.0.1:4646"
	r.HTTPTokenFile = filepath.Join(r.StateDir, "http.token")
	if h := a.HTTP; h != nil {
		if h.Address != "" {
			r.HTTPAddr = h.Address
		}
		if h.TokenFile != "" {
			r.HTTPTokenFile = h.TokenFile
		}
		r.HTTPAllowNonLoopback, r.HTTPNoAuth, r.HTTPEnableDebug = h.AllowNonLoopback, h.InsecureNoAuth, h.EnableDebug
		if h.InsecureNoAuth && h.TokenFile != "" {
			return nil, errors.New("http: insecure_no_auth and token_file are exclusive")
		}
		if h.InsecureNoAuth && !loopbackAddr(r.HTTPAddr) {
			return nil, fmt.Errorf("http: address %q is not loopback and insecure_no_auth is set: anyone who reaches it could run jobs; a non-loopback API needs its token", r.HTTPAddr)
		}
	}
	n := a.NATS
	if n == nil {
		n = &NATS{}
	}
	r.BucketPrefix = n.BucketPrefix
	if r.BucketPrefix == "" {
		r.BucketPrefix = "hivelet"
	}
	r.Replicas = max(n.Replicas, 1)
	r.RequestTimeout = 5 * time.Second
	r.NodeTTL = 30 * time.Second
	var err error
	if n.RequestTimeout != "" {
		if r.RequestTimeout, err = time.ParseDuration(n.RequestTimeout); err != nil {
			return nil, fmt.Errorf("nats.request_timeout: %w", err)
		}
	}
	if n.NodeTTL != "" {
		if r.NodeTTL, err = time.ParseDuration(n.NodeTTL); err != nil {
			return nil, fmt.Errorf("nats.node_ttl: %w", err)
		}
	}
	r.EmbeddedPort = n.EmbeddedPort
	if err := r.resolveEmbedded(n.Embedded); err != nil {
		return nil, err
	}
	if r.EmbeddedPort == 0 {
		r.EmbeddedPort = 4222
	}
	r.Embedded = dev || len(n.URLs) == 0
	if dev && len(n.URLs) > 0 {
		return nil, errors.New("-dev runs an embedded NATS server: remove nats.urls or drop -dev")
	}
	r.PolicyTimeout = 250 * time.Millisecond
	r.PolicyMemMB = 32
	if p := a.Policy; p != nil {
		if p.Timeout != "" {
			if r.PolicyTimeout, err = time.ParseDuration(p.Timeout); err != nil {
				return nil, fmt.Errorf("policy.timeout: %w", err)
			}
		}
		if p.MemoryLimitMB > 0 {
			r.PolicyMemMB = p.MemoryLimitMB
		}
	}
	if a.Docker != nil {
		r.Privileged = a.Docker.AllowPrivileged
		r.AllowCaps = strings.Join(a.Docker.AllowCaps, ",")
	}
	r.RawExec = a.RawExec != nil && a.RawExec.Enabled
	r.ExecAllowRoot = a.Exec != nil && a.Exec.AllowRoot
	r.MinDynamicPort, r.MaxDynamicPort = a.Network.dynamicRange()
	if nw := a.Network; nw != nil {
		r.NetworkAddress = nw.Address
		if r.ReservedPorts, err = ports.ParseReserved(nw.ReservedPorts); err != nil {
			return nil, fmt.Errorf("network.reserved_ports: %w", err)
		}
	}
	if r.NetworkAddress == "" && dev {
		r.NetworkAddress = "127.0.0.1"
	}
	return r, nil
}

// loopbackAddr reports whether host:port names a loopback host.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

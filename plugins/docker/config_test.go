package docker

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	engine "github.com/hivelet/hivelet/runtime/docker"
	"github.com/hivelet/hivelet/sdk/driver"
)

func baseTask(cfg map[string]any) *driver.TaskConfig {
	return &driver.TaskConfig{
		ID: "a1/web", AllocID: "a1", TaskName: "web", JobID: "job1", NodeID: "n1",
		Config:     cfg,
		Env:        map[string]string{"FROM_TASK": "1", "BOTH": "task"},
		User:       "nobody",
		Resources:  driver.Resources{CPU: 500, MemoryMB: 64},
		KillSignal: "SIGINT",
	}
}

func TestAFullConfigBecomesTheContainerSpecWithOwnershipLabels(t *testing.T) {
	tc := baseTask(map[string]any{
		"image":      "example/web:1",
		"command":    "/app",
		"args":       []any{"serve", "80"},
		"entrypoint": []any{"/bin/init"},
		"env":        map[string]any{"BOTH": "config", "ONLY": "c"},
		"labels":     map[string]any{"team": "a"},
		"ports":      []any{"metrics"},
		"publish": []any{
			map[string]any{"host": 8080, "container": 80},
			map[string]any{"container": float64(53), "protocol": "udp", "host_ip": "127.0.0.1"},
		},
		"pid_mode":           "host",
		"ipc_mode":           "host",
		"cap_add":            []any{"CAP_NET_BIND_SERVICE", "chown"},
		"cap_drop":           []any{"ALL"},
		"devices":            []any{map[string]any{"host_path": "/dev/fuse"}, map[string]any{"host_path": "/dev/null", "container_path": "/dev/n", "cgroup_permissions": "r"}},
		"mount":              []any{map[string]any{"type": "volume", "source": "data", "target": "/data", "readonly": true}},
		"volumes":            []any{"/srv:/srv:ro", "/:/host:ro,rslave"},
		"network_mode":       "bridge",
		"work_dir":           "/w",
		"image_pull_timeout": "30s",
		"force_pull":         true,
		"auth":               []any{map[string]any{"username": "u", "password": "p", "server_address": "r.example"}},
	})
	// The node tells the driver the allocation's ports through the env.
	tc.Env["NOMAD_HOST_PORT_metrics"], tc.Env["NOMAD_PORT_metrics"], tc.Env["NOMAD_HOST_IP_metrics"] = "9100", "9100", "10.0.0.5"
	p, err := makePlan(tc, planOptions{pullTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want := engine.ContainerSpec{
		Name:       "hivelet-web-a1",
		Image:      "example/web:1",
		Entrypoint: []string{"/bin/init"},
		Cmd:        []string{"/app", "serve", "80"},
		Env:        []string{"BOTH=config", "FROM_TASK=1", "NOMAD_HOST_IP_metrics=10.0.0.5", "NOMAD_HOST_PORT_metrics=9100", "NOMAD_PORT_metrics=9100", "ONLY=c"},
		Labels:     map[string]string{"team": "a", LabelAllocID: "a1", LabelTask: "web", LabelJob: "job1", LabelNodeID: "n1"},
		WorkDir:    "/w",
		User:       "nobody",
		StopSignal: "SIGINT",
		Ports: []engine.PortMapping{
			{HostIP: "10.0.0.5", HostPort: 9100, ContainerPort: 9100, Protocol: "tcp"},
			{HostIP: "10.0.0.5", HostPort: 9100, ContainerPort: 9100, Protocol: "udp"},
			{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
			{HostIP: "127.0.0.1", ContainerPort: 53, Protocol: "udp"},
		},
		Mounts:      []engine.Mount{{Type: "volume", Source: "data", Target: "/data", ReadOnly: true}},
		Binds:       []string{"/srv:/srv:ro", "/:/host:ro,rslave"},
		NetworkMode: "bridge",
		PidMode:     "host",
		IpcMode:     "host",
		CapAdd:      []string{"net_bind_service", "chown"},
		CapDrop:     []string{"all"},
		Devices:     []engine.Device{{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse", CgroupPermissions: "rwm"}, {HostPath: "/dev/null", ContainerPath: "/dev/n", CgroupPermissions: "r"}},
		CPUShares:   500,
		MemoryBytes: 64 << 20,
	}
	if !reflect.DeepEqual(p.spec, want) {
		t.Errorf("spec:\n got %+v\nwant %+v", p.spec, want)
	}
	if !p.forcePull || p.pullTimeout != 30*time.Second || p.auth == nil || p.auth.Username != "u" || p.auth.ServerAddress != "r.example" {
		t.Errorf("pull plan: %+v auth %+v", p, p.auth)
	}
}

func TestInvalidConfigsAreRefusedNamingEachField(t *testing.T) {
	cases := []struct {
		name      string
		cfg       map[string]any
		allowPriv bool
		paths     []string // want exactly these field paths
	}{
		{"valid minimal (control)", map[string]any{"image": "x"}, false, nil},
		{"image missing", map[string]any{}, false, []string{"image"}},
		{"image empty", map[string]any{"image": " "}, false, []string{"image"}},
		{"unknown key", map[string]any{"image": "x", "imgae_pull": true}, false, []string{"imgae_pull"}},
		{"privileged refused", map[string]any{"image": "x", "privileged": true}, false, []string{"privileged"}},
		{"privileged allowed (control)", map[string]any{"image": "x", "privileged": true}, true, nil},
		{"reserved label", map[string]any{"image": "x", "labels": map[string]any{"hivelet.alloc_id": "other"}}, false, []string{"labels.hivelet.alloc_id"}},
		{"port out of range", map[string]any{"image": "x", "publish": []any{map[string]any{"container": 70000, "host": -1}}}, false, []string{"publish[0].container", "publish[0].host"}},
		{"port protocol", map[string]any{"image": "x", "publish": []any{map[string]any{"container": 80, "protocol": "sctp"}}}, false, []string{"publish[0].protocol"}},
		{"a ports block (the mapping form is publish)", map[string]any{"image": "x", "ports": []any{map[string]any{"container": 80}}}, false, []string{"ports[0]"}},
		{"port label the group does not have", map[string]any{"image": "x", "ports": []any{"http"}}, false, []string{"ports[0]"}},
		{"port label unknown even on the node's network", map[string]any{"image": "x", "ports": []any{"http"}, "network_mode": "host"}, false, []string{"ports[0]"}},
		{"bad pid and ipc modes", map[string]any{"image": "x", "pid_mode": "shared", "ipc_mode": "everyone"}, false, []string{"ipc_mode", "pid_mode"}},
		{"cap_add outside the allowed set", map[string]any{"image": "x", "cap_add": []any{"chown", "SYS_ADMIN"}}, false, []string{"cap_add[1]"}},
		{"bad devices", map[string]any{"image": "x", "devices": []any{map[string]any{"host_path": "dev/fuse", "container_path": "x", "cgroup_permissions": "rwx"}}}, false,
			[]string{"devices[0].cgroup_permissions", "devices[0].container_path", "devices[0].host_path"}},
		{"relative bind", map[string]any{"image": "x", "mount": []any{map[string]any{"source": "rel", "target": "/t"}}}, false, []string{"mount[0].source"}},
		{"bad mount type", map[string]any{"image": "x", "mount": []any{map[string]any{"type": "tmpfs", "source": "/a", "target": "t"}}}, false, []string{"mount[0].target", "mount[0].type"}},
		{"bad volume", map[string]any{"image": "x", "volumes": []any{"/a", "/a:/b:rx", "data:/ok"}}, false, []string{"volumes[0]", "volumes[1]"}},
		{"bad pull timeout", map[string]any{"image": "x", "image_pull_timeout": "soon"}, false, []string{"image_pull_timeout"}},
		{"fractional port", map[string]any{"image": "x", "publish": []any{map[string]any{"container": 80.5}}}, false, []string{"publish.container"}},
		{"two auth blocks", map[string]any{"image": "x", "auth": []any{map[string]any{}, map[string]any{}}}, false, []string{"auth"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := makePlan(baseTask(c.cfg), planOptions{allowPrivileged: c.allowPriv, pullTimeout: time.Minute})
			if len(c.paths) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *driver.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a *driver.ConfigError, got %v", err)
			}
			var got []string
			for _, f := range ce.Fields {
				got = append(got, f.Path)
			}
			// ValidateConfig may name a list element's field; accept a prefix.
			if len(got) != len(c.paths) {
				t.Fatalf("fields %v, want %v (%v)", got, c.paths, err)
			}
			for i := range got {
				// A list element is named by its index where the decoder
				// says which (encoding/json from Go 1.27).
				if !strings.HasPrefix(got[i], c.paths[i]) && !strings.HasPrefix(listIndex.ReplaceAllString(got[i], ""), c.paths[i]) {
					t.Fatalf("fields %v, want %v (%v)", got, c.paths, err)
				}
			}
		})
	}
}

func TestContainerNamesKeepOnlyCharactersTheEngineAccepts(t *testing.T) {
	if got := ContainerName("web/api v2", "9f1c-4a"); got != "hivelet-web_api_v2-9f1c-4a" {
		t.Fatalf("got %q", got)
	}
}

func TestOwnershipNeedsBothTheAllocAndTheTaskLabel(t *testing.T) {
	full := map[string]string{LabelAllocID: "a1", LabelTask: "web"}
	cases := []struct {
		labels map[string]string
		want   bool
	}{
		{full, true},
		{nil, false},
		{map[string]string{}, false},
		{map[string]string{LabelAllocID: "a1"}, false},
		{map[string]string{LabelAllocID: "a2", LabelTask: "web"}, false},
		{map[string]string{LabelAllocID: "a1", LabelTask: "db"}, false},
	}
	for _, c := range cases {
		if got := owns(c.labels, "a1", "web"); got != c.want {
			t.Errorf("owns(%v) = %v, want %v", c.labels, got, c.want)
		}
	}
}

// TestAPortLabelOnTheNodesNetworkIsNotPublished: with network_mode = "host"
// the task binds the allocated port itself; in docker's bridge network the
// same label is published for tcp and udp, mapped to its `to`.
func TestAPortLabelOnTheNodesNetworkIsNotPublished(t *testing.T) {
	tc := baseTask(map[string]any{"image": "x", "ports": []any{"http"}, "network_mode": "host"})
	tc.Env["NOMAD_HOST_PORT_http"], tc.Env["NOMAD_PORT_http"], tc.Env["NOMAD_HOST_IP_http"] = "21000", "8080", "127.0.0.1"
	p, err := makePlan(tc, planOptions{})
	if err != nil || len(p.spec.Ports) != 0 {
		t.Fatalf("host network: %v, ports %+v", err, p)
	}
	tc.Config["network_mode"] = "bridge"
	p, err = makePlan(tc, planOptions{})
	want := []engine.PortMapping{{HostIP: "127.0.0.1", HostPort: 21000, ContainerPort: 8080, Protocol: "tcp"}, {HostIP: "127.0.0.1", HostPort: 21000, ContainerPort: 8080, Protocol: "udp"}}
	if err != nil || !reflect.DeepEqual(p.spec.Ports, want) {
		t.Fatalf("bridge network: %v, ports %+v", err, p.spec.Ports)
	}
}

// TestTheLoggingBlockChoosesTheEnginesLogDriver: a task without a logging
// block gets json-file bounded by the driver's settings; a json-file block
// keeps those bounds for the options it leaves out; any other log driver
// gets exactly the options written (the engine refuses json-file's options
// on journald), whether config is a block or an attribute.
func TestTheLoggingBlockChoosesTheEnginesLogDriver(t *testing.T) {
	opts := planOptions{engineLogSize: "10m", engineLogFiles: 3}
	cases := []struct {
		name     string
		logging  any
		wantType string
		wantOpts map[string]string
		wantErr  string
	}{
		{"no block: bounded json-file", nil, "json-file", map[string]string{"max-size": "10m", "max-file": "3"}, ""},
		{"json-file overrides one bound", []any{map[string]any{"type": "json-file", "config": []any{map[string]any{"max-size": "1m", "compress": "true"}}}},
			"json-file", map[string]string{"max-size": "1m", "max-file": "3", "compress": "true"}, ""},
		{"no type means json-file", []any{map[string]any{"config": map[string]any{"max-file": "9"}}},
			"json-file", map[string]string{"max-size": "10m", "max-file": "9"}, ""},
		{"journald gets only its own options", []any{map[string]any{"type": "journald", "config": []any{map[string]any{"tag": "app"}}}},
			"journald", map[string]string{"tag": "app"}, ""},
		{"local without options", []any{map[string]any{"type": "local"}}, "local", nil, ""},
		{"two blocks", []any{map[string]any{"type": "local"}, map[string]any{"type": "local"}}, "", nil, "logging: at most one logging block, got 2"},
		{"none with options", []any{map[string]any{"type": "none", "config": map[string]any{"tag": "x"}}}, "", nil, "logging.config: the none log driver takes no options"},
		{"an unknown key", []any{map[string]any{"typ": "local"}}, "", nil, `logging[0].typ: unknown key (did you mean "type"?)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := map[string]any{"image": "example/app:1"}
			if tc.logging != nil {
				cfg["logging"] = tc.logging
			}
			p, err := makePlan(baseTask(cfg), opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.spec.LogType != tc.wantType || !reflect.DeepEqual(p.spec.LogOptions, tc.wantOpts) {
				t.Fatalf("log driver %q %v, want %q %v", p.spec.LogType, p.spec.LogOptions, tc.wantType, tc.wantOpts)
			}
		})
	}
}

// TestABridgeTaskPublishesEveryPortOfTheAllocation: in a bridge group the
// container is on docker's bridge network with every port the allocation
// holds mapped from the node's port to the port in the task, whether the
// config names it or not; a network_mode contradicting the group's is a
// field error; the control, the same task in a host-mode group, publishes
// only what its config names.
func TestABridgeTaskPublishesEveryPortOfTheAllocation(t *testing.T) {
	task := func(mode string, cfg map[string]any) *driver.TaskConfig {
		tc := baseTask(cfg)
		tc.NetworkMode = mode
		for k, v := range map[string]string{"NOMAD_HOST_PORT_http": "25000", "NOMAD_PORT_http": "8080", "NOMAD_HOST_IP_http": "10.0.0.5",
			"NOMAD_HOST_PORT_admin": "25001", "NOMAD_PORT_admin": "25001", "NOMAD_HOST_IP_admin": "10.0.0.5"} {
			tc.Env[k] = v
		}
		return tc
	}
	p, err := makePlan(task("bridge", map[string]any{"image": "example/edge:1"}), planOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.PortMapping{
		{HostIP: "10.0.0.5", HostPort: 25001, ContainerPort: 25001, Protocol: "tcp"},
		{HostIP: "10.0.0.5", HostPort: 25001, ContainerPort: 25001, Protocol: "udp"},
		{HostIP: "10.0.0.5", HostPort: 25000, ContainerPort: 8080, Protocol: "tcp"},
		{HostIP: "10.0.0.5", HostPort: 25000, ContainerPort: 8080, Protocol: "udp"},
	}
	if !reflect.DeepEqual(p.spec.Ports, want) || p.spec.NetworkMode != "bridge" {
		t.Errorf("bridge: network %q ports %+v, want bridge %+v", p.spec.NetworkMode, p.spec.Ports, want)
	}
	if _, err := makePlan(task("bridge", map[string]any{"image": "example/edge:1", "network_mode": "host"}), planOptions{}); err == nil ||
		!strings.Contains(err.Error(), `network_mode: the group's network is in bridge mode`) {
		t.Errorf("bridge with network_mode host: %v", err)
	}
	p, err = makePlan(task("", map[string]any{"image": "example/edge:1", "ports": []any{"http"}}), planOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.spec.Ports) != 2 || p.spec.Ports[0].HostPort != 25000 || p.spec.NetworkMode != "" {
		t.Errorf("host mode: network %q ports %+v, want only http", p.spec.NetworkMode, p.spec.Ports)
	}
}

// TestAPortLabelWithADashIsFoundUnderItsEnvironmentSpelling: the host
// writes "jaeger-thrift" as NOMAD_HOST_PORT_jaeger_thrift (sdk/driver);
// ports = ["jaeger-thrift"] publishes it, in host mode and once (not twice)
// in bridge mode; a label the environment lacks is still refused (control).
func TestAPortLabelWithADashIsFoundUnderItsEnvironmentSpelling(t *testing.T) {
	task := func(mode string, cfg map[string]any) *driver.TaskConfig {
		tc := baseTask(cfg)
		tc.NetworkMode = mode
		for k, v := range map[string]string{"NOMAD_HOST_PORT_jaeger_thrift": "6831", "NOMAD_PORT_jaeger_thrift": "6831", "NOMAD_HOST_IP_jaeger_thrift": "10.0.0.5"} {
			tc.Env[k] = v
		}
		return tc
	}
	for _, mode := range []string{"", "bridge"} {
		p, err := makePlan(task(mode, map[string]any{"image": "example/jaeger:1", "ports": []any{"jaeger-thrift"}}), planOptions{})
		if err != nil {
			t.Fatalf("mode %q: %v", mode, err)
		}
		if len(p.spec.Ports) != 2 || p.spec.Ports[0].HostPort != 6831 || p.spec.Ports[0].HostIP != "10.0.0.5" {
			t.Errorf("mode %q: ports %+v, want 6831 tcp and udp once", mode, p.spec.Ports)
		}
	}
	if _, err := makePlan(task("", map[string]any{"image": "example/jaeger:1", "ports": []any{"jaeger-grpc"}}), planOptions{}); err == nil ||
		!strings.Contains(err.Error(), `no port labelled "jaeger-grpc"`) {
		t.Errorf("a label the allocation lacks: %v", err)
	}
}

var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

func TestAJSONFieldPathIsWrittenAsTheSchemaWritesIt(t *testing.T) {
	for in, want := range map[string]string{"publish.0.container": "publish[0].container", "publish.container": "publish.container",
		"a.1.b.2": "a[1].b[2]", "ports": "ports"} {
		if got := schemaPath(in); got != want {
			t.Errorf("schemaPath(%q) = %q, want %q", in, got, want)
		}
	}
}

package docker

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	engine "github.com/hivelet/hivelet/runtime/docker"
	"github.com/hivelet/hivelet/sdk/driver"
)

// TestAHostVolumeIsBoundReadOnlyWhenTheHostSaysSo: the host's mounts (a
// group's host volumes) become bind mounts with their read-only flag and
// their propagation in the engine's words, and the task directory's own
// binds give way to a mount at the same target. Control: the task
// directory's /local bind is still made when no mount takes it.
func TestAHostVolumeIsBoundReadOnlyWhenTheHostSaysSo(t *testing.T) {
	dir := t.TempDir()
	tc := baseTask(map[string]any{"image": "x"})
	tc.AllocDir = dir
	mkdirs(t, dir+"/alloc", dir+"/web/local", dir+"/web/secrets")
	tc.Mounts = []driver.Mount{
		{HostPath: "/var/run/docker.sock", TaskPath: "/var/run/docker.sock", ReadOnly: true},
		{HostPath: "/srv/run", TaskPath: "/run/promtail", PropagationMode: "host-to-task"},
		{HostPath: "/srv/secrets", TaskPath: "/secrets", PropagationMode: "bidirectional"},
	}
	p, err := makePlan(tc, planOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Mount{
		{Type: "bind", Source: "/var/run/docker.sock", Target: "/var/run/docker.sock", ReadOnly: true},
		{Type: "bind", Source: "/srv/run", Target: "/run/promtail", Propagation: "rslave"},
		{Type: "bind", Source: "/srv/secrets", Target: "/secrets", Propagation: "rshared"},
	}
	if !reflect.DeepEqual(p.spec.Mounts, want) {
		t.Fatalf("mounts = %+v\nwant %+v", p.spec.Mounts, want)
	}
	wantBinds := []string{dir + "/alloc:/alloc", dir + "/web/local:/local"}
	if !reflect.DeepEqual(p.spec.Binds, wantBinds) {
		t.Fatalf("binds = %v, want %v (no /secrets: the host volume is mounted there)", p.spec.Binds, wantBinds)
	}
}

// TestBindOptionsSetABindMountsPropagation: mount { bind_options {
// propagation } } (pi-tools node-exporter's shape) reaches the engine;
// an unknown propagation, or bind_options on a named volume, is refused
// naming the field.
func TestBindOptionsSetABindMountsPropagation(t *testing.T) {
	cfg := map[string]any{"image": "x", "mount": []any{
		map[string]any{"type": "bind", "source": "/", "target": "/host/root", "readonly": true,
			"bind_options": []any{map[string]any{"propagation": "rslave"}}},
		map[string]any{"type": "bind", "source": "/proc", "target": "/host/proc"},
	}}
	p, err := makePlan(baseTask(cfg), planOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Mount{
		{Type: "bind", Source: "/", Target: "/host/root", ReadOnly: true, Propagation: "rslave"},
		{Type: "bind", Source: "/proc", Target: "/host/proc"},
	}
	if !reflect.DeepEqual(p.spec.Mounts, want) {
		t.Fatalf("mounts = %+v, want %+v", p.spec.Mounts, want)
	}

	bad := map[string]any{"image": "x", "mount": []any{
		map[string]any{"source": "/a", "target": "/a", "bind_options": []any{map[string]any{"propagation": "sideways"}}},
		map[string]any{"type": "volume", "source": "data", "target": "/d", "bind_options": []any{map[string]any{"propagation": "rslave"}}},
	}}
	_, err = makePlan(baseTask(bad), planOptions{})
	var ce *driver.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a ConfigError", err)
	}
	for _, w := range []string{"mount[0].bind_options.propagation: want one of private, rprivate, shared, rshared, slave, rslave, got \"sideways\"",
		"mount[1].bind_options: bind_options apply to a bind mount, this one is a volume"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// TestPortMapPublishesALabelIntoTheContainerPortItGives: port_map {
// cadvisor = 8080 } (the older docker syntax, nomad-intro's cadvisor)
// publishes the label's node port into container port 8080, with no
// ports = [...] needed; a label the allocation lacks is refused under
// port_map.<label>.
func TestPortMapPublishesALabelIntoTheContainerPortItGives(t *testing.T) {
	tc := baseTask(map[string]any{"image": "x", "port_map": []any{map[string]any{"cadvisor": "8080"}}})
	tc.Env["NOMAD_HOST_PORT_cadvisor"], tc.Env["NOMAD_PORT_cadvisor"], tc.Env["NOMAD_HOST_IP_cadvisor"] = "23456", "23456", "10.0.0.5"
	p, err := makePlan(tc, planOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.PortMapping{
		{HostIP: "10.0.0.5", HostPort: 23456, ContainerPort: 8080, Protocol: "tcp"},
		{HostIP: "10.0.0.5", HostPort: 23456, ContainerPort: 8080, Protocol: "udp"},
	}
	if !reflect.DeepEqual(p.spec.Ports, want) {
		t.Fatalf("ports = %+v, want %+v", p.spec.Ports, want)
	}

	missing := baseTask(map[string]any{"image": "x", "port_map": map[string]any{"web": "80"}, "ports": []any{"cadvisor"}})
	missing.Env["NOMAD_HOST_PORT_cadvisor"] = "23456"
	_, err = makePlan(missing, planOptions{})
	if err == nil || !strings.Contains(err.Error(), `port_map.web: no port labelled "web"`) {
		t.Fatalf("err = %v, want port_map.web refused", err)
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

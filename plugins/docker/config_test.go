package docker

import (
	"errors"
	"reflect"
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
		"ports": []any{
			map[string]any{"host": 8080, "container": 80},
			map[string]any{"container": float64(53), "protocol": "udp", "host_ip": "127.0.0.1"},
		},
		"mount":              []any{map[string]any{"type": "volume", "source": "data", "target": "/data", "readonly": true}},
		"volumes":            []any{"/srv:/srv:ro"},
		"network_mode":       "bridge",
		"work_dir":           "/w",
		"image_pull_timeout": "30s",
		"force_pull":         true,
		"auth":               []any{map[string]any{"username": "u", "password": "p", "server_address": "r.example"}},
	})
	p, err := makePlan(tc, planOptions{pullTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want := engine.ContainerSpec{
		Name:       "hivelet-web-a1",
		Image:      "example/web:1",
		Entrypoint: []string{"/bin/init"},
		Cmd:        []string{"/app", "serve", "80"},
		Env:        []string{"BOTH=config", "FROM_TASK=1", "ONLY=c"},
		Labels:     map[string]string{"team": "a", LabelAllocID: "a1", LabelTask: "web", LabelJob: "job1", LabelNodeID: "n1"},
		WorkDir:    "/w",
		User:       "nobody",
		StopSignal: "SIGINT",
		Ports: []engine.PortMapping{
			{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
			{HostIP: "127.0.0.1", ContainerPort: 53, Protocol: "udp"},
		},
		Mounts:      []engine.Mount{{Type: "volume", Source: "data", Target: "/data", ReadOnly: true}},
		Binds:       []string{"/srv:/srv:ro"},
		NetworkMode: "bridge",
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
		{"port out of range", map[string]any{"image": "x", "ports": []any{map[string]any{"container": 70000, "host": -1}}}, false, []string{"ports[0].container", "ports[0].host"}},
		{"port protocol", map[string]any{"image": "x", "ports": []any{map[string]any{"container": 80, "protocol": "sctp"}}}, false, []string{"ports[0].protocol"}},
		{"port wrong type", map[string]any{"image": "x", "ports": []any{"8080:80"}}, false, []string{"ports[0]"}},
		{"relative bind", map[string]any{"image": "x", "mount": []any{map[string]any{"source": "rel", "target": "/t"}}}, false, []string{"mount[0].source"}},
		{"bad mount type", map[string]any{"image": "x", "mount": []any{map[string]any{"type": "tmpfs", "source": "/a", "target": "t"}}}, false, []string{"mount[0].target", "mount[0].type"}},
		{"bad volume", map[string]any{"image": "x", "volumes": []any{"/a", "/a:/b:rx", "data:/ok"}}, false, []string{"volumes[0]", "volumes[1]"}},
		{"bad pull timeout", map[string]any{"image": "x", "image_pull_timeout": "soon"}, false, []string{"image_pull_timeout"}},
		{"fractional port", map[string]any{"image": "x", "ports": []any{map[string]any{"container": 80.5}}}, false, []string{"ports.container"}},
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
				if !strings.HasPrefix(got[i], c.paths[i]) {
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

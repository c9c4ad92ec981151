package jobspec_test

import (
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/jobspec"
	"github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/sdk/driver"
)

// What the real corpus (testdata/corpus/real) showed hivelet should take
// as Nomad does: each case is a shape found in a published job file.

func parseWithDocker(t *testing.T, src string) ([]string, error) {
	t.Helper()
	var warns []string
	_, err := jobspec.ParseWith("real.nomad", []byte(src), jobspec.Inputs{
		Drivers: map[string]*driver.Schema{"docker": docker.Schema()},
		Warn:    func(e *jobspec.Error) { warns = append(warns, e.Error()) },
	})
	return warns, err
}

// TestADriverConfigValueIsConvertedToTheSchemasTypeAsNomadDoes:
// privileged = "true" is the bool true for docker (Nomad's HCL decoding
// converts it), a number in a string list is its text; a text that is no
// bool stays refused (the control).
func TestADriverConfigValueIsConvertedToTheSchemasTypeAsNomadDoes(t *testing.T) {
	const tmpl = `job "telegraf" {
  type = "system"
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image      = "telegraf:1.31.2"
        privileged = PRIV
        args       = ["--port", 8080]
      }
    }
  }
}
`
	var got *bool
	job, err := jobspec.ParseWith("real.nomad", []byte(strings.Replace(tmpl, "PRIV", `"true"`, 1)), jobspec.Inputs{
		Drivers: map[string]*driver.Schema{"docker": docker.Schema()}})
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	cfg := job.Groups[0].Tasks[0].Config
	if b, ok := cfg["privileged"].(bool); ok {
		got = &b
	}
	if got == nil || !*got {
		t.Fatalf("privileged = %#v, want the bool true", cfg["privileged"])
	}
	if args, _ := cfg["args"].([]any); len(args) != 2 || args[1] != "8080" {
		t.Fatalf("args = %#v, want the number as its text", cfg["args"])
	}
	_, err = parseWithDocker(t, strings.Replace(tmpl, "PRIV", `"yes please"`, 1))
	if err == nil || !strings.Contains(err.Error(), "real.nomad:6:7: docker config: privileged: must be a bool, got a string") {
		t.Fatalf("a text that is no bool: %v", err)
	}
}

// TestServiceMetaAndTheGroupConsulBlockAreAcceptedWithAWarning: both are
// read (a bad value is still an error) and warned about at their position,
// since nothing in hivelet uses them.
func TestServiceMetaAndTheGroupConsulBlockAreAcceptedWithAWarning(t *testing.T) {
	src := `job "exporter" {
  type = "system"
  group "g" {
    network {
      port "http" {}
    }
    consul {
      namespace = "infra"
    }
    service {
      name = "exporter"
      port = "http"
      meta {
        metrics_path = "/metrics"
      }
    }
    task "t" {
      driver = "docker"
      config {
        image = "prom/node-exporter"
        ports = ["http"]
      }
    }
  }
}
`
	warns, err := parseWithDocker(t, src)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	all := strings.Join(warns, "\n")
	for _, want := range []string{"real.nomad:7:5: the consul block is accepted and not applied", "real.nomad:13:7: the service's meta is accepted and not registered"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings lack %q:\n%s", want, all)
		}
	}
	// Control: a consul block with a key Nomad does not have, and a meta
	// value that is not a string, are errors.
	bad := strings.Replace(strings.Replace(src, `namespace = "infra"`, `namespaces = "infra"`, 1), `metrics_path = "/metrics"`, `metrics_path = ["/metrics"]`, 1)
	_, err = parseWithDocker(t, bad)
	if err == nil || !strings.Contains(err.Error(), `real.nomad:8:7: unknown attribute "namespaces" in the consul block`) || !strings.Contains(err.Error(), "real.nomad:14:") {
		t.Fatalf("bad consul and meta: %v", err)
	}
}

// TestATaskLevelRestartBlockIsItsGroupsWhenTheTaskIsAlone: Nomad's
// task-level restart overrides its group's for the task; with one task,
// that is the group's policy, field by field over the group's block. With
// two tasks (the control) it is refused at its position.
func TestATaskLevelRestartBlockIsItsGroupsWhenTheTaskIsAlone(t *testing.T) {
	const one = `job "telegraf" {
  type = "system"
  group "g" {
    restart {
      attempts = 4
    }
    task "t" {
      driver = "docker"
      config {
        image = "telegraf"
      }
      restart {
        delay = "5s"
        mode  = "delay"
      }
    }
  }
}
`
	job, err := jobspec.Parse("real.nomad", []byte(one))
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if r := job.Groups[0].Restart; r.Attempts != 4 || r.Delay.D().String() != "5s" || r.Mode != "delay" || r.Interval.D().String() != "30m0s" {
		t.Fatalf("restart %+v, want attempts 4 (group), delay 5s and mode delay (task), interval 30m (default)", r)
	}
	two := strings.Replace(one, `    task "t" {`, "    task \"side\" {\n      driver = \"docker\"\n      config {\n        image = \"x\"\n      }\n    }\n    task \"t\" {", 1)
	_, err = jobspec.Parse("real.nomad", []byte(two))
	if err == nil || !strings.Contains(err.Error(), "real.nomad:18:7: a task-level restart block in a group of 2 tasks: hivelet's restart policy is per group") {
		t.Fatalf("two tasks: %v", err)
	}
}

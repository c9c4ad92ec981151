package jobspec

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/sdk/driver"
)

// TestANodeExporterShapedJobParsesItsNetworkRegionTagsAndPorts: the shape
// of nearly every community system job (a group network with a labelled
// port, docker ports = ["label"], ${NOMAD_PORT_label}, a service on the
// label with tags) parses into the model unchanged.
func TestANodeExporterShapedJobParsesItsNetworkRegionTagsAndPorts(t *testing.T) {
	j := mustParse(t, "node-exporter.nomad", `
job "node-exporter" {
  region      = "eu-west"
  datacenters = ["dc1"]
  type        = "system"

  group "node-exporter" {
    network {
      port "metrics" {
        static = 9100
      }
      port "admin" {
        to = 8080
      }
      port "dyn" {}
    }

    task "node-exporter" {
      driver = "docker"
      config {
        image = "node-exporter:local"
        ports = ["metrics"]
        args  = ["--web.listen-address=:${NOMAD_PORT_metrics}"]
      }
      service {
        name = "node-exporter"
        port = "metrics"
        tags = ["prometheus", "system"]
        check {
          type     = "http"
          path     = "/metrics"
          interval = "10s"
          timeout  = "2s"
        }
      }
    }
  }
}`)
	if j.Region != "eu-west" {
		t.Errorf("region = %q, want it recorded", j.Region)
	}
	g := j.Groups[0]
	wantNet := &model.Network{Mode: model.NetworkHost, Ports: []model.Port{
		{Label: "metrics", Static: 9100}, {Label: "admin", To: 8080}, {Label: "dyn"},
	}}
	if !reflect.DeepEqual(g.Network, wantNet) {
		t.Errorf("network = %+v, want %+v", g.Network, wantNet)
	}
	task := g.Tasks[0]
	if got := task.Config["ports"]; !reflect.DeepEqual(got, []any{"metrics"}) {
		t.Errorf("docker ports = %#v", got)
	}
	if got := task.Config["args"].([]any)[0]; got != "--web.listen-address=:${NOMAD_PORT_metrics}" {
		t.Errorf("interpolation not kept as text: %q", got)
	}
	if s := task.Services[0]; s.Port != "metrics" || !reflect.DeepEqual(s.Tags, []string{"prometheus", "system"}) {
		t.Errorf("service = %+v", s)
	}
}

func TestAGroupLevelServiceIsTheGroups(t *testing.T) {
	j := mustParse(t, "g.nomad", `
job "j" {
  type = "system"
  group "g" {
    network {
      port "http" { static = 8080 }
    }
    service {
      name     = "web"
      port     = "http"
      provider = "nomad"
      tags     = ["a"]
      check {
        type     = "tcp"
        interval = "5s"
        timeout  = "1s"
      }
    }
    task "t" { driver = "docker" }
  }
}`)
	g := j.Groups[0]
	if len(g.Services) != 1 || g.Services[0].Port != "http" || len(g.Services[0].Checks) != 1 || len(g.Tasks[0].Services) != 0 {
		t.Fatalf("group services %+v, task services %+v", g.Services, g.Tasks[0].Services)
	}
}

func TestMaxRunDurationIsReadOnSysbatchGroups(t *testing.T) {
	j := mustParse(t, "gc.hcl", `
job "gc" {
  type = "sysbatch"
  group "g" {
    max_run_duration = "90s"
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}`)
	if got := j.Groups[0].MaxRunDuration.D(); got != 90*time.Second {
		t.Errorf("max_run_duration = %s, want 1m30s", got)
	}
	// Control: the same group in a system job is refused at its position.
	_, err := ParseHCL("gc.hcl", []byte(`job "gc" {
  type = "system"
  group "g" {
    max_run_duration = "90s"
    task "t" { driver = "exec" }
  }
}`))
	if err == nil || err.Error() != `gc.hcl:4:24: max_run_duration applies to sysbatch jobs only: a system job's tasks run until the job is stopped` {
		t.Errorf("system job with max_run_duration: %v", err)
	}
}

// TestTaskConfigsAreCheckedAgainstTheGivenDriverSchemas: with the built-in
// drivers' schemas (what job validate passes), a config the driver would
// refuse is an error at the task's position, a near-miss driver name a
// warning there (it may be a plugin of the nodes); a driver name far from
// every known one is left to the nodes (control: no word about it).
func TestTaskConfigsAreCheckedAgainstTheGivenDriverSchemas(t *testing.T) {
	schemas := map[string]*driver.Schema{"docker": {Fields: map[string]*driver.Field{
		"image": {Type: driver.TypeString, Required: true},
		"ports": {Type: driver.TypeStringList},
	}}}
	src := `job "x" {
  type = "system"
  group "g" {
    task "a" {
      driver = "dokcer"
    }
    task "b" {
      driver = "docker"
      config {
        ports { container = 80 }
      }
    }
    task "c" {
      driver = "my-own-plugin"
    }
  }
}`
	var warns []string
	_, err := ParseHCLWith("x.hcl", []byte(src), Inputs{Drivers: schemas, Warn: func(e *Error) { warns = append(warns, e.Error()) }})
	want := `x.hcl:9:7: docker config: image: required string is missing
x.hcl:9:7: docker config: ports[0]: must be a string, got an object`
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	if len(warns) != 1 || warns[0] != `x.hcl:5:16: driver "dokcer" is not a built-in driver (did you mean "docker"?); only a node with a plugin of that name can run the task` {
		t.Fatalf("warnings %q", warns)
	}
	if _, err := ParseHCL("x.hcl", []byte(src)); err != nil {
		t.Fatalf("without schemas the configs are free-form: %v", err)
	}
	_, err = ParseWith("x.json", []byte(`{"id":"x","type":"system","groups":[{"name":"g","count":1,"tasks":[{"name":"b","driver":"docker","config":{}}]}]}`), Inputs{Drivers: schemas})
	if err == nil || err.Error() != "x.json: groups[0].tasks[0].config: docker config: image: required string is missing" {
		t.Fatalf("JSON: %v", err)
	}
}

// TestWhatIsAcceptedAndIgnoredIsWarnedAtItsPosition: stagger, a task's
// logs block, a template's splay and wait, a group's ephemeral_disk parse, and each is reported as a
// warning at its position; a file without them warns nothing (control).
func TestWhatIsAcceptedAndIgnoredIsWarnedAtItsPosition(t *testing.T) {
	src := `job "w" {
  type = "system"
  update {
    stagger = "30s"
  }
  group "g" {
    task "t" {
      driver = "docker"
      logs {
        max_files     = 3
        max_file_size = 10
      }
      template {
        data        = "x"
        destination = "local/x"
        splay       = "5s"
        wait {
          min = "1s"
        }
      }
    }
    ephemeral_disk {
      size = 300
    }
  }
}`
	var got []string
	warn := func(e *Error) { got = append(got, e.Error()) }
	if _, err := ParseHCLWith("w.hcl", []byte(src), Inputs{Warn: warn}); err != nil {
		t.Fatal(err)
	}
	want := []string{"w.hcl:4:5: stagger is accepted and ignored", "w.hcl:9:7: the logs block is accepted and not applied", "w.hcl:16:9: splay is accepted and ignored", "w.hcl:17:9: wait is accepted and ignored", "w.hcl:22:5: the ephemeral_disk block is accepted and not applied"}
	if len(got) != len(want) {
		t.Fatalf("warnings %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %q, want it to start with %q", got[i], want[i])
		}
	}
	got = nil
	if _, err := ParseHCLWith("w.hcl", []byte(`job "w" {
  type = "system"
  group "g" {
    task "t" { driver = "docker" }
  }
}`), Inputs{Warn: warn}); err != nil || len(got) != 0 {
		t.Fatalf("a plain file: %v, warnings %q", err, got)
	}
}

// TestARefusedPortLabelOrProviderNamesWhatExists: a docker ports entry and
// a service or check port that are no label of the group's network are
// refused at their position with the labels the group has (and the near
// miss); a provider that is neither of Nomad's two is refused with the
// near one, "consul" is a warning (nothing reaches Consul), "nomad" says
// nothing. Control: the same file with the right labels parses, with only
// the consul warning.
func TestARefusedPortLabelOrProviderNamesWhatExists(t *testing.T) {
	schemas := map[string]*driver.Schema{"docker": {Fields: map[string]*driver.Field{
		"image": {Type: driver.TypeString, Required: true},
		"ports": {Type: driver.TypeStringList},
	}}}
	tmpl := `job "x" {
  type = "system"
  group "g" {
    network {
      port "http" {}
      port "admin" {}
    }
    task "t" {
      driver = "docker"
      config {
        image = "x"
        ports = ["http", "%s"]
      }
      service {
        name     = "a"
        provider = "consul"
        port     = "%s"
        check {
          type     = "tcp"
          interval = "10s"
          timeout  = "1s"
          port     = "admin"
        }
      }
      service {
        name     = "b"
        provider = "%s"
        port     = "http"
      }
    }
  }
}`
	var warns []string
	in := Inputs{Drivers: schemas, Warn: func(e *Error) { warns = append(warns, e.Error()) }}
	_, err := ParseHCLWith("x.hcl", []byte(fmt.Sprintf(tmpl, "admn", "htp", "nomda")), in)
	want := `x.hcl:10:7: docker config: ports[1]: "admn" is not a port label of the group's network, which has "http", "admin" (did you mean "admin"?)
x.hcl:17:20: port "htp" is not a port label of the group's network block, which has "http", "admin" (add port "htp" {} to it, or give a number)
x.hcl:27:20: service provider "nomda" is not one of "nomad", "consul" (did you mean "nomad"?)`
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	consul := `x.hcl:16:20: service provider "consul": hivelet registers the service in its own catalog (hivelet service list), as provider "nomad" does; nothing is written to Consul`
	if len(warns) != 1 || warns[0] != consul {
		t.Fatalf("warnings %q", warns)
	}
	warns = nil
	if _, err := ParseHCLWith("x.hcl", []byte(fmt.Sprintf(tmpl, "admin", "http", "nomad")), in); err != nil || len(warns) != 1 || warns[0] != consul {
		t.Fatalf("the right labels and provider: %v, warnings %q", err, warns)
	}
}

// TestANetworkInsideATasksResourcesBecomesTheGroupsNetwork: Nomad's old
// place for ports (still in many public job files) is read as the group's
// network with a warning, mbits warned and ignored, and the task's
// service may name its ports; a second one, from another task or beside
// the group's own, is refused at its position (control: the group's own
// network alone parses without a word).
func TestANetworkInsideATasksResourcesBecomesTheGroupsNetwork(t *testing.T) {
	src := `job "lb" {
  type = "system"
  group "lb" {
    task "lb" {
      driver = "docker"
      config {
        image = "lb:1"
        ports = ["ui"]
      }
      service {
        port = "ui"
      }
      resources {
        cpu = 100
        network {
          mbits = 20
          port "lb" {
            static = 9999
          }
          port "ui" {}
        }
      }
    }
  }
}`
	var warns []string
	in := Inputs{Warn: func(e *Error) { warns = append(warns, e.Error()) }}
	job, err := ParseHCLWith("lb.hcl", []byte(src), in)
	if err != nil {
		t.Fatal(err)
	}
	n := job.Groups[0].Network
	if n == nil || n.Mode != model.NetworkHost || len(n.Ports) != 2 || n.Ports[0] != (model.Port{Label: "lb", Static: 9999}) || n.Ports[1].Label != "ui" {
		t.Fatalf("the group's network: %+v", n)
	}
	want := []string{`lb.hcl:15:9: a network block inside a task's resources is read as the group's network (Nomad deprecated it there; write it in the group)`,
		`lb.hcl:16:11: mbits is accepted and ignored: hivelet reserves no network bandwidth`}
	if !reflect.DeepEqual(warns, want) {
		t.Fatalf("warnings %q, want %q", warns, want)
	}

	second := strings.Replace(src, "  group \"lb\" {\n", "  group \"lb\" {\n    network {\n      port \"admin\" {}\n    }\n", 1)
	_, err = ParseHCL("lb.hcl", []byte(second))
	if err == nil || !strings.Contains(err.Error(), `lb.hcl:18:9: the group has its own network block already: move these ports into it`) {
		t.Fatalf("beside the group's own network: %v", err)
	}
	own := `job "lb" {
  type = "system"
  group "lb" {
    network {
      port "ui" {}
    }
    task "lb" {
      driver = "docker"
      config {
        image = "lb:1"
        ports = ["ui"]
      }
    }
  }
}`
	warns = nil
	if _, err := ParseHCLWith("lb.hcl", []byte(own), in); err != nil || len(warns) != 0 {
		t.Fatalf("the group's own network: %v, warnings %q", err, warns)
	}
}

// TestACheckTakesNomadsProbeThresholds: success_before_passing and
// failures_before_critical are read (a quoted number too, as Nomad's files
// often write it); a negative one is refused at its position.
func TestACheckTakesNomadsProbeThresholds(t *testing.T) {
	src := `job "x" {
  type = "system"
  group "g" {
    task "t" {
      driver = "exec"
      config {
        command = "/bin/true"
      }
      service {
        port = "9100"
        check {
          type                     = "tcp"
          interval                 = "10s"
          timeout                  = "2s"
          success_before_passing   = "3"
          failures_before_critical = %s
        }
      }
    }
  }
}`
	job, err := ParseHCL("x.hcl", []byte(fmt.Sprintf(src, "2")))
	if err != nil {
		t.Fatal(err)
	}
	if c := job.Groups[0].Tasks[0].Services[0].Checks[0]; c.SuccessBeforePassing != 3 || c.FailuresBeforeCritical != 2 {
		t.Fatalf("check %+v", c)
	}
	_, err = ParseHCL("x.hcl", []byte(fmt.Sprintf(src, "-1")))
	if err == nil || err.Error() != "x.hcl:16:38: failures_before_critical must not be negative (got -1)" {
		t.Fatalf("a negative threshold: %v", err)
	}
}

// TestAddressModeHostOrAutoIsWhatHiveletDoes: a service's or check's
// address_mode "host" or "auto" parses (hivelet registers and probes the
// address the node published); "driver" is refused with that reason and
// a misspelling with the near value, each at its position.
func TestAddressModeHostOrAutoIsWhatHiveletDoes(t *testing.T) {
	src := `job "x" {
  type = "system"
  group "g" {
    network {
      port "web" {}
    }
    task "t" {
      driver = "exec"
      config {
        command = "/bin/true"
      }
      service {
        port         = "web"
        address_mode = "%s"
        check {
          type         = "tcp"
          interval     = "10s"
          timeout      = "2s"
          address_mode = "%s"
        }
      }
    }
  }
}`
	if _, err := ParseHCL("x.hcl", []byte(fmt.Sprintf(src, "host", "auto"))); err != nil {
		t.Fatalf("host and auto: %v", err)
	}
	_, err := ParseHCL("x.hcl", []byte(fmt.Sprintf(src, "driver", "hots")))
	want := `x.hcl:14:24: address_mode "driver" is not supported by hivelet: it registers and checks the address the node publishes for the port ("host", the same as "auto" here)
x.hcl:19:26: address_mode "hots" is not one of "auto", "host", "driver", "alloc" (did you mean "host"?)`
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

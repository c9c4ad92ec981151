package jobspec

import (
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

const checkRestartJob = `job "w" {
  type = "system"
  group "g" {
    network {
      port "http" {}
    }
    task "t" {
      driver = "docker"
      config {
        image = "nginx"
      }
      service {
        name = "web"
        port = "http"
        check_restart {
          limit = 3
          grace = "90s"
        }
        check {
          type     = "http"
          path     = "/"
          interval = "10s"
          timeout  = "2s"
        }
        check {
          type     = "tcp"
          interval = "10s"
          timeout  = "2s"
          check_restart {
            limit           = 5
            ignore_warnings = true
          }
        }
      }
      service {
        name = "plain"
        port = "http"
        check {
          type     = "tcp"
          interval = "10s"
          timeout  = "2s"
          check_restart {
            limit = 2
          }
        }
        check {
          type     = "tcp"
          interval = "10s"
          timeout  = "2s"
        }
      }
    }
  }
}
`

// TestCheckRestartIsInheritedFromTheServiceFieldByField: a service's
// check_restart applies to each of its checks; a check's own block wins for
// the fields it sets and takes the rest from the service's; grace defaults
// to Nomad's 1s; a check with no block anywhere restarts nothing (control).
func TestCheckRestartIsInheritedFromTheServiceFieldByField(t *testing.T) {
	job, err := Parse("w.nomad", []byte(checkRestartJob))
	if err != nil {
		t.Fatal(err)
	}
	svcs := job.Groups[0].Tasks[0].Services
	got := []*model.CheckRestart{svcs[0].Checks[0].CheckRestart, svcs[0].Checks[1].CheckRestart, svcs[1].Checks[0].CheckRestart}
	want := []model.CheckRestart{
		{Limit: 3, Grace: model.Duration(90 * time.Second)},                       // the service's, as is
		{Limit: 5, Grace: model.Duration(90 * time.Second), IgnoreWarnings: true}, // its own limit and ignore_warnings, the service's grace
		{Limit: 2, Grace: model.Duration(time.Second)},                            // its own; grace defaults to 1s
	}
	for i := range want {
		if got[i] == nil || *got[i] != want[i] {
			t.Errorf("check %d: check_restart %+v, want %+v", i, got[i], want[i])
		}
	}
	if cr := svcs[1].Checks[1].CheckRestart; cr != nil {
		t.Errorf("a check with no check_restart anywhere got %+v", cr)
	}
}

// TestCheckRestartErrorsNameTheirPosition: a negative limit, a bad grace, an
// unknown key and a group service's check_restart are each refused at the
// line and column where they are written, with a reason; the service-level
// block's error points at the service's block, not at a check.
func TestCheckRestartErrorsNameTheirPosition(t *testing.T) {
	src := `job "w" {
  type = "system"
  group "g" {
    service {
      name = "gs"
      port = "8080"
      check {
        type     = "tcp"
        interval = "10s"
        timeout  = "2s"
        check_restart {
          limit = 1
        }
      }
    }
    task "t" {
      driver = "docker"
      config {
        image = "nginx"
      }
      service {
        name = "web"
        port = "8080"
        check_restart {
          limit = -1
        }
        check {
          type     = "tcp"
          interval = "10s"
          timeout  = "2s"
          check_restart {
            grace  = "-5s"
            limits = 2
          }
        }
        check {
          type     = "tcp"
          interval = "10s"
          timeout  = "2s"
        }
      }
    }
  }
}
`
	_, err := Parse("w.nomad", []byte(src))
	if err == nil {
		t.Fatal("parsed; want errors")
	}
	msg := err.Error()
	for _, want := range []string{
		`w.nomad:11:9: check_restart on a group service's check: hivelet's group checks name no task to restart`,
		`w.nomad:25:19: check_restart limit must not be negative (got -1`,
		`w.nomad:32:22: grace must not be negative, got -5s`,
		`w.nomad:33:13: unknown attribute "limits" in the check_restart block (did you mean "limit"?)`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors lack %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "is not supported by hivelet") {
		t.Errorf("check_restart is still refused as unsupported:\n%s", msg)
	}
}

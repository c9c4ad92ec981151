package jobspec

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/sdk/driver"
)

// TestHostVolumesAndHostNetworksReachTheModel: the shapes the real files
// write (jhillyerd's logging.nomad, pi-tools' promtail, hashi-homelab's
// telegraf) parse into the group's volumes, the task's volume_mounts and
// the port's host_network; "default" is Nomad's name for the node's own
// address, so it names no network (the control).
func TestHostVolumesAndHostNetworksReachTheModel(t *testing.T) {
	src := `job "v" {
  type = "system"
  group "g" {
    network {
      port "http" {
        host_network = "tailscale"
        to           = "9273"
      }
      port "admin" {
        host_network = "default"
      }
    }
    volume "docker-sock" {
      type      = "host"
      source    = "docker-sock-ro"
      read_only = true
    }
    volume "run" {
      type      = "host"
      read_only = false
      source    = "promtail_run"
    }
    task "t" {
      driver = "docker"
      config {
        image = "x"
        ports = ["http"]
      }
      volume_mount {
        volume      = "docker-sock"
        destination = "/var/run/docker.sock"
        read_only   = true
      }
      volume_mount {
        volume           = "run"
        destination      = "/run/promtail"
        propagation_mode = "host-to-task"
      }
    }
  }
}
`
	job, err := Parse("v.nomad", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	g := job.Groups[0]
	wantVols := []model.Volume{{Name: "docker-sock", Type: model.VolumeHost, Source: "docker-sock-ro", ReadOnly: true}, {Name: "run", Type: model.VolumeHost, Source: "promtail_run"}}
	if !reflect.DeepEqual(g.Volumes, wantVols) {
		t.Errorf("volumes %+v, want %+v", g.Volumes, wantVols)
	}
	wantMounts := []model.VolumeMount{{Volume: "docker-sock", Destination: "/var/run/docker.sock", ReadOnly: true}, {Volume: "run", Destination: "/run/promtail", PropagationMode: "host-to-task"}}
	if !reflect.DeepEqual(g.Tasks[0].VolumeMounts, wantMounts) {
		t.Errorf("volume_mounts %+v, want %+v", g.Tasks[0].VolumeMounts, wantMounts)
	}
	wantPorts := []model.Port{{Label: "http", To: 9273, HostNetwork: "tailscale"}, {Label: "admin"}}
	if !reflect.DeepEqual(g.Network.Ports, wantPorts) {
		t.Errorf("ports %+v, want %+v", g.Network.Ports, wantPorts)
	}
	if got := g.HostVolumesWanted(); !reflect.DeepEqual(got, []string{"docker-sock-ro", "promtail_run"}) {
		t.Errorf("host volumes wanted %v", got)
	}
	if got := g.HostNetworksWanted(); !reflect.DeepEqual(got, []string{"tailscale"}) {
		t.Errorf("host networks wanted %v", got)
	}
}

// TestPortMapNamesLabelsOfTheGroupsNetwork: docker's port_map { label =
// 8080 } (a number, as the older syntax writes it) validates against the
// docker schema once converted, when its label is one of the group's
// ports (the control); a label the group lacks is refused at its task,
// with the labels the group has.
func TestPortMapNamesLabelsOfTheGroupsNetwork(t *testing.T) {
	src := func(label string) []byte {
		return []byte(`job "c" {
  type = "system"
  group "g" {
    task "cadvisor" {
      driver = "docker"
      config {
        image = "google/cadvisor"
        port_map {
          ` + label + ` = 8080
        }
      }
      resources {
        network {
          port "cadvisor" {}
        }
      }
    }
  }
}
`)
	}
	in := Inputs{Drivers: map[string]*driver.Schema{"docker": docker.Schema()}}
	job, err := ParseWith("c.nomad", src("cadvisor"), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := job.Groups[0].Tasks[0].Config["port_map"]; !reflect.DeepEqual(got, []any{map[string]any{"cadvisor": "8080"}}) {
		t.Fatalf("port_map = %#v: want the number converted to the schema's string", got)
	}
	_, err = ParseWith("c.nomad", src("cadvsior"), in)
	if err == nil || !strings.Contains(err.Error(), `docker config: port_map.cadvsior: "cadvsior" is not a port label of the group's network, which has "cadvisor" (did you mean "cadvisor"?)`) {
		t.Fatalf("err = %v", err)
	}
}

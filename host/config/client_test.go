package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestTheClientBlockDeclaresHostVolumesAndNetworks: Nomad's client {
// host_volume, host_network } reads as written; each mistake fails the
// load at its own line (a relative path, a duplicate, a network with
// neither cidr nor interface, a bad CIDR), and the good file is the
// control.
func TestTheClientBlockDeclaresHostVolumesAndNetworks(t *testing.T) {
	good := `
client {
  host_volume "docker-sock-ro" {
    path      = "/var/run/docker.sock"
    read_only = true
  }
  host_volume "certs" {
    path = "/srv/certs"
  }
  host_network "tailscale" {
    cidr      = "100.64.0.0/10"
    interface = "tailscale0"
  }
}
`
	a, err := Parse([]byte(good), "agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := &Client{
		HostVolumes:  []HostVolume{{Name: "docker-sock-ro", Path: "/var/run/docker.sock", ReadOnly: true}, {Name: "certs", Path: "/srv/certs"}},
		HostNetworks: []HostNetwork{{Name: "tailscale", CIDR: "100.64.0.0/10", Interface: "tailscale0"}},
	}
	if !reflect.DeepEqual(a.Client, want) {
		t.Fatalf("client %+v, want %+v", a.Client, want)
	}

	// The same as JSON (labelled blocks are objects keyed by label).
	j, err := Parse([]byte(`{"client": {"host_volume": {"docker-sock-ro": {"path": "/var/run/docker.sock", "read_only": true}, "certs": {"path": "/srv/certs"}},
		"host_network": {"tailscale": {"cidr": "100.64.0.0/10", "interface": "tailscale0"}}}}`), "agent.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Client.HostVolumes) != 2 || len(j.Client.HostNetworks) != 1 || j.Client.HostNetworks[0] != want.HostNetworks[0] {
		t.Fatalf("JSON client %+v", j.Client)
	}

	bad := `client {
  host_volume "a" {
    path = "srv/a"
  }
  host_volume "a" {
    path = "/srv/a"
  }
  host_network "n" {
  }
  host_network "m" {
    cidr = "10.0.0/8"
  }
}
`
	_, err = Parse([]byte(bad), "agent.hcl")
	if err == nil {
		t.Fatal("a bad client block loaded")
	}
	for _, w := range []string{
		`agent.hcl:3:5: invalid host volume path: client.host_volume "a": path = "srv/a"`,
		`agent.hcl:5:3: duplicate host volume: client.host_volume "a" is declared twice`,
		`agent.hcl:8:3: incomplete host network: client.host_network "n": give cidr, interface or both`,
		`agent.hcl:11:5: invalid cidr: client.host_network "m": cidr = "10.0.0/8"`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error\n%v\nlacks %q", err, w)
		}
	}
}

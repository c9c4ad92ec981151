package main

import (
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/config"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/ports"
)

// TestTheClientBlockBecomesTheNodesHostVolumesAndNetworks: the node's
// record carries each host volume as configured and each host network with
// the node's address on it; a network whose address cannot be found fails
// the start naming it; no host network asks nothing of the interfaces
// (the control: a listing that fails is not called).
func TestTheClientBlockBecomesTheNodesHostVolumesAndNetworks(t *testing.T) {
	list := func() ([]ports.Interface, error) {
		return []ports.Interface{{Name: "tailscale0", Addrs: []net.IP{net.ParseIP("100.64.1.2")}}}, nil
	}
	c := &config.Client{
		HostVolumes:  []config.HostVolume{{Name: "certs", Path: "/srv/certs", ReadOnly: true}},
		HostNetworks: []config.HostNetwork{{Name: "tailscale", Interface: "tailscale0"}},
	}
	vols, nets, err := clientResources(c, list)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]model.HostVolume{"certs": {Path: "/srv/certs", ReadOnly: true}}; !reflect.DeepEqual(vols, want) {
		t.Errorf("volumes %+v, want %+v", vols, want)
	}
	if want := map[string]model.HostNetwork{"tailscale": {Interface: "tailscale0", Address: "100.64.1.2"}}; !reflect.DeepEqual(nets, want) {
		t.Errorf("networks %+v, want %+v", nets, want)
	}

	c.HostNetworks = append(c.HostNetworks, config.HostNetwork{Name: "public", CIDR: "203.0.113.0/24"})
	if _, _, err := clientResources(c, list); err == nil || !strings.Contains(err.Error(), `client.host_network "public": no interface of the node has an address in 203.0.113.0/24`) {
		t.Fatalf("err = %v", err)
	}

	c.HostNetworks = nil
	failing := func() ([]ports.Interface, error) { return nil, errors.New("must not be called") }
	if vols, nets, err := clientResources(c, failing); err != nil || len(vols) != 1 || nets != nil {
		t.Fatalf("without host networks: %v %v %v", vols, nets, err)
	}
}

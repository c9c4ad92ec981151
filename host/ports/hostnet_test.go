package ports

import (
	"net"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

func ifaces() []Interface {
	ip := net.ParseIP
	return []Interface{
		{Name: "lo", Addrs: []net.IP{ip("127.0.0.1"), ip("::1")}},
		{Name: "eth0", Addrs: []net.IP{ip("fe80::1"), ip("2001:db8::5"), ip("192.168.1.10")}},
		{Name: "tailscale0", Addrs: []net.IP{ip("100.101.102.103")}},
	}
}

// TestAHostNetworksAddressIsTheFirstOfItsInterfaceInItsCIDR: Nomad's
// rule, IPv4 first; each failure names what is missing.
func TestAHostNetworksAddressIsTheFirstOfItsInterfaceInItsCIDR(t *testing.T) {
	for _, c := range []struct{ cidr, iface, want, err string }{
		{cidr: "100.64.0.0/10", want: "100.101.102.103"},
		{iface: "eth0", want: "192.168.1.10"},
		{iface: "eth0", cidr: "2001:db8::/32", want: "2001:db8::5"},
		{cidr: "127.0.0.0/8", want: "127.0.0.1"},
		{iface: "eth1", err: `no interface "eth1"`},
		{iface: "lo", cidr: "10.0.0.0/8", err: `interface "lo" has no address in 10.0.0.0/8`},
		{cidr: "10.0.0.0/8", err: "no interface of the node has an address in 10.0.0.0/8"},
	} {
		got, err := HostNetworkAddress(ifaces(), c.cidr, c.iface)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: got %q, %v; want error %q", c, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: got %q, %v; want %q", c, got, err, c.want)
		}
	}
}

// TestAPortOnAHostNetworkIsPublishedOnItsAddress: the port naming the
// network gets the network's address, the other the node's (control);
// a network the node lacks fails the assignment, holding nothing.
func TestAPortOnAHostNetworkIsPublishedOnItsAddress(t *testing.T) {
	tb, err := New(Config{Address: "10.0.0.5", MinDynamic: 20000, MaxDynamic: 20010, Networks: map[string]string{"public": "203.0.113.7"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tb.Assign("a1", &model.Network{Ports: []model.Port{{Label: "web", Static: 80, HostNetwork: "public"}, {Label: "admin"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].HostIP != "203.0.113.7" || got[1].HostIP != "10.0.0.5" {
		t.Fatalf("ports %+v: web on the public network's address, admin on the node's", got)
	}
	_, err = tb.Assign("a2", &model.Network{Ports: []model.Port{{Label: "x", Static: 81}, {Label: "y", HostNetwork: "tailscale"}}})
	if err == nil || !strings.Contains(err.Error(), `port "y" names host network "tailscale", which this node does not have`) {
		t.Fatalf("err = %v", err)
	}
	if held := tb.Held(); len(held) != 2 {
		t.Fatalf("held %v: the failed assignment must hold nothing", held)
	}
}

package ports

import (
	"fmt"
	"net"
)

// Interface is one network interface of the node and its addresses, as
// HostNetworkAddress reads them (SystemInterfaces on a real node).
type Interface struct {
	Name  string
	Addrs []net.IP
}

// HostNetworkAddress is the node's address on a host network (the agent's
// client { host_network "name" { cidr, interface } }), Nomad's way: the
// first address of interface iface (any interface when "") inside cidr
// (any address when ""), IPv4 before IPv6, loopback only when the network
// names it. It is pure: the interfaces are passed in.
func HostNetworkAddress(ifaces []Interface, cidr, iface string) (string, error) {
	var nw *net.IPNet
	if cidr != "" {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return "", fmt.Errorf("cidr %q: %w", cidr, err)
		}
		nw = n
	}
	var v6 string
	found := false
	for _, ifc := range ifaces {
		if iface != "" && ifc.Name != iface {
			continue
		}
		found = true
		for _, ip := range ifc.Addrs {
			if nw != nil && !nw.Contains(ip) {
				continue
			}
			if nw == nil && ip.IsLinkLocalUnicast() {
				continue
			}
			if ip.To4() != nil {
				return ip.String(), nil
			}
			if v6 == "" {
				v6 = ip.String()
			}
		}
	}
	switch {
	case v6 != "":
		return v6, nil
	case iface != "" && !found:
		return "", fmt.Errorf("the node has no interface %q", iface)
	case iface != "" && cidr != "":
		return "", fmt.Errorf("interface %q has no address in %s", iface, cidr)
	case iface != "":
		return "", fmt.Errorf("interface %q has no address", iface)
	}
	return "", fmt.Errorf("no interface of the node has an address in %s", cidr)
}

// SystemInterfaces lists the node's interfaces that are up, with their
// addresses.
func SystemInterfaces() ([]Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing network interfaces: %w", err)
	}
	var out []Interface
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		one := Interface{Name: ifc.Name}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				one.Addrs = append(one.Addrs, ipn.IP)
			}
		}
		out = append(out, one)
	}
	return out, nil
}

// Package ports owns this node's port table: which allocation holds which
// port on the node. An allocation whose group has a network block gets its
// ports here when it first runs (static ports as written, dynamic ones from
// the agent's configured range), records them with itself, and hands them
// back when its tasks are gone. A restored allocation claims the ports it
// recorded, so they survive agent restarts unchanged.
//
// Invariants:
//   - No two allocations of the node hold the same port at once, whatever
//     the order of assignments, claims and releases
//     (TestTwoAllocationsNeverHoldTheSamePort).
//   - Assign and Claim are all or nothing: a request that cannot be met
//     records nothing (TestAFailedAssignmentHoldsNothing).
//   - A reserved port is never given out, static or dynamic.
//   - The table does no I/O. The only look outside (is a port already bound
//     by a process hivelet did not start?) is the InUse function its caller
//     passes in; Listenable is the one the agent uses.
//
// The network block it serves is specified in docs/job-files.md ("Network and
// ports").
package ports

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hivelet/hivelet/host/model"
)

// Default dynamic range, Nomad's.
const (
	DefaultMinDynamic = 20000
	DefaultMaxDynamic = 32000
)

// Config shapes a table.
type Config struct {
	// Address is the node address ports are published on (each allocated
	// port's host_ip). Required.
	Address string
	// MinDynamic and MaxDynamic bound the dynamic range, inclusive.
	MinDynamic, MaxDynamic int
	// Reserved ports are never given to an allocation.
	Reserved []int
	// Networks are the node's host networks and its address on each
	// (the agent's client { host_network }): a port naming one is
	// published there.
	Networks map[string]string
	// InUse, when set, reports whether a port is already taken by something
	// outside the table (it is asked only for dynamic candidates).
	InUse func(port int) bool
}

// Table is the node's port table; safe for concurrent use.
type Table struct {
	cfg      Config
	reserved map[int]bool

	mu      sync.Mutex
	holder  map[int]string                   // port → allocation ID
	byAlloc map[string][]model.AllocatedPort // allocation ID → its ports
	next    int                              // where the next dynamic search starts
}

// New checks cfg and builds an empty table.
func New(cfg Config) (*Table, error) {
	if strings.TrimSpace(cfg.Address) == "" {
		return nil, errors.New("ports: an address to publish ports on is required")
	}
	if net.ParseIP(cfg.Address) == nil {
		return nil, fmt.Errorf("ports: address %q is not an IP address", cfg.Address)
	}
	if cfg.MinDynamic < 1 || cfg.MaxDynamic > 65535 || cfg.MinDynamic > cfg.MaxDynamic {
		return nil, fmt.Errorf("ports: dynamic range %d-%d must lie within 1-65535, lowest first", cfg.MinDynamic, cfg.MaxDynamic)
	}
	t := &Table{cfg: cfg, reserved: map[int]bool{}, holder: map[int]string{}, byAlloc: map[string][]model.AllocatedPort{}, next: cfg.MinDynamic}
	for _, p := range cfg.Reserved {
		t.reserved[p] = true
	}
	return t, nil
}

// Address is the node address the table publishes ports on.
func (t *Table) Address() string { return t.cfg.Address }

// Assign gives allocID the ports of network n: each static port as written
// (unless reserved or held by another allocation), each dynamic one the
// first free port of the range after the last one given. An allocation that
// already holds ports gets them back unchanged.
func (t *Table) Assign(allocID string, n *model.Network) ([]model.AllocatedPort, error) {
	if n == nil || len(n.Ports) == 0 {
		return nil, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if held, ok := t.byAlloc[allocID]; ok {
		return clone(held), nil
	}
	taken := map[int]bool{} // given in this request
	out := make([]model.AllocatedPort, 0, len(n.Ports))
	for _, p := range n.Ports {
		if p.Static == 0 {
			continue
		}
		if t.reserved[p.Static] {
			return nil, fmt.Errorf("static port %d (label %q) is reserved on this node (agent network.reserved_ports)", p.Static, p.Label)
		}
		if other, ok := t.holder[p.Static]; ok && other != allocID {
			return nil, fmt.Errorf("static port %d (label %q) is already held by allocation %s on this node", p.Static, p.Label, other)
		}
		taken[p.Static] = true
	}
	for _, p := range n.Ports {
		if _, ok := t.cfg.Networks[p.HostNetwork]; p.HostNetwork != "" && !ok {
			return nil, fmt.Errorf("port %q names host network %q, which this node does not have (its agent's client { host_network %q { } })", p.Label, p.HostNetwork, p.HostNetwork)
		}
	}
	next := t.next
	for _, p := range n.Ports {
		value := p.Static
		if value == 0 {
			v, ok := t.findDynamic(&next, taken)
			if !ok {
				return nil, fmt.Errorf("no free dynamic port for label %q: every port of %d-%d is held, reserved or in use on this node",
					p.Label, t.cfg.MinDynamic, t.cfg.MaxDynamic)
			}
			value = v
			taken[v] = true
		}
		ip := t.cfg.Address
		if p.HostNetwork != "" {
			ip = t.cfg.Networks[p.HostNetwork]
		}
		out = append(out, model.AllocatedPort{Label: p.Label, Value: value, To: p.To, HostIP: ip})
	}
	t.next = next
	t.hold(allocID, out)
	return clone(out), nil
}

// findDynamic searches the range once around, from *next, for a port that
// is neither held, reserved, taken by this request nor in use.
func (t *Table) findDynamic(next *int, taken map[int]bool) (int, bool) {
	size := t.cfg.MaxDynamic - t.cfg.MinDynamic + 1
	for range size {
		p := *next
		*next++
		if *next > t.cfg.MaxDynamic {
			*next = t.cfg.MinDynamic
		}
		if _, held := t.holder[p]; held || t.reserved[p] || taken[p] {
			continue
		}
		if t.cfg.InUse != nil && t.cfg.InUse(p) {
			continue
		}
		return p, true
	}
	return 0, false
}

// Claim records ports an allocation already holds (restored from the state
// store). It fails, recording nothing, when one of them is held by another
// allocation; claiming again for the same allocation is a no-op.
func (t *Table) Claim(allocID string, ports []model.AllocatedPort) error {
	if len(ports) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byAlloc[allocID]; ok {
		return nil
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p.Value < 1 || p.Value > 65535 {
			return fmt.Errorf("recorded port %d (label %q) is out of 1..65535", p.Value, p.Label)
		}
		if other, ok := t.holder[p.Value]; ok && other != allocID {
			return fmt.Errorf("recorded port %d (label %q) is already held by allocation %s on this node", p.Value, p.Label, other)
		}
		if seen[p.Value] {
			return fmt.Errorf("recorded port %d appears twice", p.Value)
		}
		seen[p.Value] = true
	}
	t.hold(allocID, clone(ports))
	return nil
}

func (t *Table) hold(allocID string, ports []model.AllocatedPort) {
	for _, p := range ports {
		t.holder[p.Value] = allocID
	}
	t.byAlloc[allocID] = ports
}

// Release frees every port allocID holds; releasing twice is a no-op.
func (t *Table) Release(allocID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.byAlloc[allocID] {
		if t.holder[p.Value] == allocID {
			delete(t.holder, p.Value)
		}
	}
	delete(t.byAlloc, allocID)
}

// Held returns each held port and its allocation, by port.
func (t *Table) Held() map[int]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int]string, len(t.holder))
	for p, a := range t.holder {
		out[p] = a
	}
	return out
}

func clone(ps []model.AllocatedPort) []model.AllocatedPort {
	return append([]model.AllocatedPort(nil), ps...)
}

// Listenable returns an InUse function that reports a port as in use when a
// TCP listener cannot be opened on address:port (another process holds it).
func Listenable(address string) func(port int) bool {
	return func(port int) bool {
		l, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(port)))
		if err != nil {
			return true
		}
		_ = l.Close()
		return false
	}
}

// ParseReserved reads a reserved-ports list such as "22,80,8000-8100".
func ParseReserved(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 1 || a > 65535 {
			return nil, fmt.Errorf("reserved port %q is not a port number (1-65535)", part)
		}
		b := a
		if isRange {
			b, err = strconv.Atoi(strings.TrimSpace(hi))
			if err != nil || b < a || b > 65535 {
				return nil, fmt.Errorf("reserved range %q must be low-high within 1-65535", part)
			}
		}
		for p := a; p <= b; p++ {
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out, nil
}

// DefaultAddress is the address a non-dev agent publishes ports on when its
// configuration names none: the first IPv4 address of an interface that is
// up and not loopback (in the order the system lists them), else 127.0.0.1.
func DefaultAddress() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "127.0.0.1"
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

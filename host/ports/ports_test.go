package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

func newTable(t *testing.T, min, max int, reserved ...int) *Table {
	t.Helper()
	tb, err := New(Config{Address: "127.0.0.1", MinDynamic: min, MaxDynamic: max, Reserved: reserved})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func dyn(labels ...string) *model.Network {
	n := &model.Network{Mode: model.NetworkHost}
	for _, l := range labels {
		n.Ports = append(n.Ports, model.Port{Label: l})
	}
	return n
}

// TestTwoAllocationsNeverHoldTheSamePort drives a table through random
// assignments, claims and releases and checks, after every step, that no
// port is held by two allocations and that each allocation's recorded ports
// are the ones the table says it holds.
func TestTwoAllocationsNeverHoldTheSamePort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tb := newTable(t, 30000, 30040, 30005, 30006)
	live := map[string][]model.AllocatedPort{}
	assigned := 0
	for step := range 3000 {
		id := fmt.Sprintf("a%d", rng.IntN(30))
		switch rng.IntN(3) {
		case 0, 1:
			n := dyn("http", "admin")
			if rng.IntN(4) == 0 {
				n.Ports = append(n.Ports, model.Port{Label: "fixed", Static: 30000 + rng.IntN(41)})
			}
			// An error (range exhausted, static collision) must hold
			// nothing: the comparison below checks it.
			if got, err := tb.Assign(id, n); err == nil {
				if prev, ok := live[id]; ok && fmt.Sprint(prev) != fmt.Sprint(got) {
					t.Fatalf("step %d: %s assigned again got %v, it held %v", step, id, got, prev)
				}
				live[id] = got
				assigned++
			}
		case 2:
			tb.Release(id)
			delete(live, id)
		}
		owner := map[int]string{}
		for a, ps := range live {
			for _, p := range ps {
				if other, dup := owner[p.Value]; dup {
					t.Fatalf("step %d: port %d held by %s and %s", step, p.Value, other, a)
				}
				owner[p.Value] = a
				if p.Value == 30005 || p.Value == 30006 {
					t.Fatalf("step %d: reserved port %d given to %s", step, p.Value, a)
				}
			}
		}
		if held := tb.Held(); fmt.Sprint(held) != fmt.Sprint(owner) {
			t.Fatalf("step %d: table holds %v, allocations recorded %v", step, held, owner)
		}
	}
	if assigned < 500 {
		t.Fatalf("only %d successful assignments: the walk did not exercise the table", assigned)
	}
}

func TestDynamicPortsComeFromTheRangeAndStaticPortsAsWritten(t *testing.T) {
	tb := newTable(t, 25000, 25002)
	got, err := tb.Assign("a", &model.Network{Ports: []model.Port{{Label: "m", Static: 9100}, {Label: "d", To: 8080}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []model.AllocatedPort{{Label: "m", Value: 9100, HostIP: "127.0.0.1"}, {Label: "d", Value: 25000, To: 8080, HostIP: "127.0.0.1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	b, err := tb.Assign("b", dyn("d"))
	if err != nil || b[0].Value != 25001 {
		t.Fatalf("second allocation: %v %v, want 25001", b, err)
	}
	if _, err := tb.Assign("c", &model.Network{Ports: []model.Port{{Label: "m", Static: 9100}}}); err == nil ||
		!strings.Contains(err.Error(), `static port 9100 (label "m") is already held by allocation a`) {
		t.Fatalf("static collision: %v", err)
	}
	tb.Release("a")
	if _, err := tb.Assign("c", &model.Network{Ports: []model.Port{{Label: "m", Static: 9100}}}); err != nil {
		t.Fatalf("static port after its holder released it: %v", err)
	}
}

func TestAFailedAssignmentHoldsNothing(t *testing.T) {
	tb := newTable(t, 25000, 25001)
	if _, err := tb.Assign("a", dyn("x", "y", "z")); err == nil || !strings.Contains(err.Error(), `no free dynamic port for label "z"`) {
		t.Fatalf("three ports from a range of two: %v", err)
	}
	if h := tb.Held(); len(h) != 0 {
		t.Fatalf("a failed assignment holds %v", h)
	}
	// Control: two fit.
	if _, err := tb.Assign("a", dyn("x", "y")); err != nil {
		t.Fatal(err)
	}
	if h := tb.Held(); len(h) != 2 {
		t.Fatalf("held %v, want 2 ports", h)
	}
}

func TestReservedAndInUsePortsAreSkipped(t *testing.T) {
	busy := map[int]bool{25001: true}
	tb, err := New(Config{Address: "127.0.0.1", MinDynamic: 25000, MaxDynamic: 25003, Reserved: []int{25000},
		InUse: func(p int) bool { return busy[p] }})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tb.Assign("a", dyn("x"))
	if err != nil || got[0].Value != 25002 {
		t.Fatalf("got %v %v, want 25002 (25000 reserved, 25001 in use)", got, err)
	}
	if _, err := tb.Assign("b", &model.Network{Ports: []model.Port{{Label: "s", Static: 25000}}}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("static reserved port: %v", err)
	}
}

func TestRestoredAllocationsClaimTheirRecordedPorts(t *testing.T) {
	tb := newTable(t, 25000, 25010)
	rec := []model.AllocatedPort{{Label: "d", Value: 25000, HostIP: "127.0.0.1"}}
	if err := tb.Claim("a", rec); err != nil {
		t.Fatal(err)
	}
	if err := tb.Claim("b", rec); err == nil || !strings.Contains(err.Error(), "already held by allocation a") {
		t.Fatalf("second claim of the same port: %v", err)
	}
	// The claimed port is not given to a new allocation; the claimant gets
	// its own back.
	got, err := tb.Assign("c", dyn("d"))
	if err != nil || got[0].Value == 25000 {
		t.Fatalf("new allocation got %v %v: the claimed port must not be reused", got, err)
	}
	again, err := tb.Assign("a", dyn("d"))
	if err != nil || fmt.Sprint(again) != fmt.Sprint(rec) {
		t.Fatalf("claimant's assignment = %v %v, want its record %v", again, err, rec)
	}
}

func TestListenableSeesABoundPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	inUse := Listenable("127.0.0.1")
	if !inUse(port) {
		t.Fatalf("port %d is bound but reported free", port)
	}
	l.Close()
	if inUse(port) {
		t.Fatalf("port %d was released but is reported in use", port)
	}
}

func TestReservedListsAndConfigAreChecked(t *testing.T) {
	got, err := ParseReserved("22, 80,8000-8002")
	if err != nil || fmt.Sprint(got) != "[22 80 8000 8001 8002]" {
		t.Fatalf("ParseReserved = %v %v", got, err)
	}
	for _, bad := range []string{"x", "0", "9-3", "70000"} {
		if _, err := ParseReserved(bad); err == nil {
			t.Errorf("ParseReserved(%q) accepted", bad)
		}
	}
	for _, cfg := range []Config{{MinDynamic: 1, MaxDynamic: 2}, {Address: "host", MinDynamic: 1, MaxDynamic: 2}, {Address: "127.0.0.1", MinDynamic: 5, MaxDynamic: 4}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

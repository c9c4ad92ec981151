package allocrunner

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/internal/testutil"
	"github.com/hivelet/hivelet/sdk/driver"
)

// serveTCP listens on addr and accepts (and closes) every connection until
// the listener is closed, by the test or at its cleanup.
func serveTCP(t *testing.T, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l
}

// memRegistry records registrations by key.
type memRegistry struct {
	mu   sync.Mutex
	regs map[string]*model.ServiceRegistration
}

func (m *memRegistry) Register(_ context.Context, r *model.ServiceRegistration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *r
	m.regs[r.Name+"/"+r.AllocID] = &c
	return nil
}

func (m *memRegistry) Deregister(_ context.Context, r *model.ServiceRegistration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.regs, r.Name+"/"+r.AllocID)
	return nil
}

func (m *memRegistry) get(key string) *model.ServiceRegistration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.regs[key]
}

func (m *memRegistry) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.regs)
}

// TestAServiceIsRegisteredWhileItsCheckPassesAndGoneWhenTheAllocationStops:
// registered at the address of its port label once the check passes,
// deregistered when it fails, registered again when it passes, and gone
// after Stop. A task service without checks is registered while its task
// runs, under the default name.
func TestAServiceIsRegisteredWhileItsCheckPassesAndGoneWhenTheAllocationStops(t *testing.T) {
	l := serveTCP(t, "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	f := newFixture(t, map[string]any{}, nil, nil)
	g := f.job.Groups[0]
	g.Network = &model.Network{Mode: model.NetworkHost, Ports: []model.Port{{Label: "http", Static: port}}}
	g.Services = []model.Service{{Name: "${NOMAD_JOB_NAME}-api", Port: "http", Tags: []string{"v1"}, Checks: []model.Check{
		{Type: model.CheckTCP, Interval: model.Duration(20 * time.Millisecond), Timeout: model.Duration(time.Second)}}}}
	g.Tasks[0].Services = []model.Service{{Port: "9000"}}
	reg := &memRegistry{regs: map[string]*model.ServiceRegistration{}}
	r := New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1", Attributes: map[string]string{AttrNetworkAddress: "10.0.0.7"}},
		Drivers: f.drv, Validate: validate, Store: f.store, AllocRoot: f.root, Ports: portTable(t), Services: reg})
	r.Run()
	testutil.Eventually(t, 5*time.Second, "both services registered", func() bool { return reg.count() == 2 })
	api := reg.get("web-api/a1")
	if api == nil || api.Address != "127.0.0.1" || api.Port != port || api.Group != "g" || api.Task != "" || len(api.Tags) != 1 {
		t.Fatalf("group service registration %+v", api)
	}
	if plain := reg.get("web-g-t/a1"); plain == nil || plain.Address != "10.0.0.7" || plain.Port != 9000 || plain.Task != "t" {
		t.Fatalf("task service registration %+v", plain)
	}

	l.Close()
	testutil.Eventually(t, 5*time.Second, "the failing service deregistered", func() bool { return reg.get("web-api/a1") == nil })
	if reg.get("web-g-t/a1") == nil {
		t.Fatal("the service without checks went with the other's failure")
	}
	serveTCP(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	testutil.Eventually(t, 5*time.Second, "registered again", func() bool { return reg.get("web-api/a1") != nil })

	stopRunner(t, r)
	if n := reg.count(); n != 0 {
		t.Fatalf("%d registrations left after the allocation stopped", n)
	}
}

// TestADetachedRunnerLeavesItsRegistrations: an agent shutdown leaves the
// tasks running, and their services registered.
func TestADetachedRunnerLeavesItsRegistrations(t *testing.T) {
	f := newFixture(t, map[string]any{}, nil, nil)
	f.job.Groups[0].Tasks[0].Services = []model.Service{{Name: "plain", Port: "9000"}}
	reg := &memRegistry{regs: map[string]*model.ServiceRegistration{}}
	r := New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1"}, Drivers: f.drv, Validate: validate, Store: f.store,
		AllocRoot: f.root, Services: reg})
	r.Run()
	testutil.Eventually(t, 5*time.Second, "registered", func() bool { return reg.count() == 1 })
	r.Detach()
	if reg.count() != 1 {
		t.Fatal("Detach deregistered the service of a task left running")
	}
}

// TestARestoredAllocationsFailingServiceIsDeregistered: a registration the
// runner before an agent restart wrote is taken as registered by the
// restored runner, which deletes it once its check fails (a runner that
// knew nothing of it would leave it forever); a stop then deletes every key
// the allocation may have written.
func TestARestoredAllocationsFailingServiceIsDeregistered(t *testing.T) {
	l := serveTCP(t, "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	f := newFixture(t, map[string]any{}, nil, nil)
	g := f.job.Groups[0]
	g.Services = []model.Service{{Name: "api", Port: strconv.Itoa(port), Checks: []model.Check{
		{Type: model.CheckTCP, Interval: model.Duration(50 * time.Millisecond), Timeout: model.Duration(time.Second)}}}}
	reg := &memRegistry{regs: map[string]*model.ServiceRegistration{}}
	cfg := Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1"}, Drivers: f.drv, Validate: validate, Store: f.store,
		AllocRoot: f.root, Services: reg}
	r := New(cfg)
	r.Run()
	testutil.Eventually(t, 5*time.Second, "registered", func() bool { return reg.get("api/a1") != nil })
	r.Detach()

	l.Close() // the service fails while the agent is away
	f.store.mu.Lock()
	cfg.Alloc, cfg.Job, cfg.Handles = f.store.allocs["a1"].Alloc, f.store.allocs["a1"].Job, map[string]*driver.TaskHandle{"t": f.store.handles["a1/t"]}
	f.store.mu.Unlock()
	r2 := New(cfg)
	r2.Run()
	testutil.Eventually(t, 5*time.Second, "the failing service deregistered by the restored runner", func() bool { return reg.get("api/a1") == nil })
	stopRunner(t, r2)
	if reg.count() != 0 {
		t.Fatalf("registrations left: %d", reg.count())
	}
}

// TestShutdownDelayDeregistersTheServicesBeforeTheTasksAreKilled: with a
// shutdown_delay, Stop deregisters first and sends the kill signal only
// after the delay; the control without one kills at once.
func TestShutdownDelayDeregistersTheServicesBeforeTheTasksAreKilled(t *testing.T) {
	run := func(delay time.Duration) (deregisteredBeforeKill bool, took time.Duration) {
		f := newFixture(t, map[string]any{}, nil, nil)
		f.job.Groups[0].ShutdownDelay = model.Duration(delay)
		f.job.Groups[0].Tasks[0].Services = []model.Service{{Name: "plain", Port: "9000"}}
		reg := &memRegistry{regs: map[string]*model.ServiceRegistration{}}
		r := New(Config{Alloc: f.alloc, Job: f.job, Node: &model.Node{ID: "n1"}, Drivers: f.drv, Validate: validate, Store: f.store,
			AllocRoot: f.root, Services: reg})
		r.Run()
		testutil.Eventually(t, 5*time.Second, "registered", func() bool { return reg.count() == 1 })
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = r.Stop(ctx, "test")
		}()
		start := time.Now()
		testutil.Eventually(t, 5*time.Second, "deregistered or killed", func() bool { return reg.count() == 0 || len(f.drv.stopCalls()) > 0 })
		deregisteredBeforeKill = reg.count() == 0 && len(f.drv.stopCalls()) == 0
		<-r.Done()
		return deregisteredBeforeKill, time.Since(start)
	}
	const delay = time.Second
	if first, took := run(delay); !first || took < delay {
		t.Fatalf("with shutdown_delay: deregistered before the kill %v, stop took %s", first, took)
	}
	if _, took := run(0); took >= delay {
		t.Fatalf("without shutdown_delay the stop took %s, as long as the delay", took)
	}
}

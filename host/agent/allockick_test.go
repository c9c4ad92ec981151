package agent

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/reconcile"
	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/host/wanted"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

// stillSource is a ViewSource where nothing ever changes (the test below
// runs no pass).
type stillSource struct{}

func (stillSource) Changed() <-chan struct{} { return nil }
func (stillSource) Synced() <-chan struct{}  { return nil }
func (stillSource) View() *fleet.View        { return &fleet.View{} }
func (stillSource) Generation() uint64       { return 0 }
func (stillSource) ChangesSince(uint64, uint64) ([]fleet.Change, bool) {
	return nil, true
}
func (stillSource) Alloc(string) (wanted.AllocState, bool) { return wanted.AllocState{}, false }
func (stillSource) Deployment(string) (wanted.DeploymentState, bool) {
	return wanted.DeploymentState{}, false
}

type oneDriver struct{ d driver.Driver }

func (o oneDriver) Driver(context.Context, string) (driver.Driver, error) { return o.d, nil }

// A stopped runner reports once more after its goroutines end (Stop's
// final write follows Done). A pass that collects it in between must not be
// followed by a kick record that nothing removes any more: one entry per
// stopped allocation, for the agent's life.
func TestACollectedAllocationLeavesNoKickRecordBehind(t *testing.T) {
	st, err := state.Open(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, err := New(Config{
		Node:      func() *model.Node { return &model.Node{ID: "n1", Name: "n1", Datacenter: "dc1"} },
		Source:    stillSource{},
		Store:     st,
		Drivers:   oneDriver{mock.New()},
		AllocRoot: t.TempDir(),
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	job := &model.Job{ID: "web", Type: model.JobTypeSystem, Version: 1, Groups: []*model.Group{{
		Name: "g", Count: 1,
		Tasks: []*model.Task{{Name: "t", Driver: "mock", Config: map[string]any{}, KillTimeout: model.Duration(time.Second)}},
	}}}
	const n = 5
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("a%d", i)
		if started, err := a.place(job, reconcile.Entry{Name: fmt.Sprintf("web.g[%d]", i), Group: "g"}, id, "", ""); err != nil || !started {
			t.Fatalf("placing %s: started %v, %v", id, started, err)
		}
		a.mu.Lock()
		r := a.runners[id]
		a.mu.Unlock()
		deadline := time.Now().Add(5 * time.Second)
		for r.Snapshot().ClientStatus != model.ClientRunning {
			if time.Now().After(deadline) {
				t.Fatalf("%s never ran", id)
			}
			time.Sleep(2 * time.Millisecond)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- r.Stop(context.Background(), "test") }()
		<-r.Done()
		a.collectFinished() // a pass starting now: Stop's last write is still on its way
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		a.mu.Lock()
		_, live := a.runners[id]
		_, done := a.terminal[id]
		a.mu.Unlock()
		if live || !done {
			t.Fatalf("%s: live %v, finished %v; want it collected", id, live, done)
		}
	}
	a.mu.Lock()
	left := len(a.allocKick)
	a.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d kick records left for %d collected allocations, want 0", left, n)
	}

	// Control: a live runner's record is kept (it is what spares a pass).
	if _, err := a.place(job, reconcile.Entry{Name: "web.g[9]", Group: "g"}, "live", "", ""); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	_, kept := a.allocKick["live"]
	r := a.runners["live"]
	a.mu.Unlock()
	if !kept {
		t.Fatal("a live runner has no kick record")
	}
	if err := r.Stop(context.Background(), "test over"); err != nil {
		t.Fatal(err)
	}
}

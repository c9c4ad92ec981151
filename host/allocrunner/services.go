package allocrunner

import (
	"context"
	"fmt"
	"maps"
	"net"
	"reflect"
	"strconv"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// ServiceRegistry is where the runner registers its allocation's services
// (host/services.Store).
type ServiceRegistry interface {
	Register(ctx context.Context, r *model.ServiceRegistration) error
	Deregister(ctx context.Context, r *model.ServiceRegistration) error
}

// AttrNetworkAddress is the node attribute naming the node's address (what
// a service with a numeric port is registered at).
const AttrNetworkAddress = "unique.network.ip-address"

// registrationTimeout bounds the writes of one sync.
const registrationTimeout = 10 * time.Second

// pokeServices asks the service loop to compare what is registered with
// what should be.
func (r *Runner) pokeServices() {
	select {
	case r.svcPoke <- struct{}{}:
	default:
	}
}

// hasServices reports whether the group or a task declares a service.
func hasServices(g *model.Group) bool {
	if len(g.Services) > 0 {
		return true
	}
	for _, t := range g.Tasks {
		if len(t.Services) > 0 {
			return true
		}
	}
	return false
}

// serviceLoop keeps the allocation's registrations in step with its
// services' health until the runner's goroutines end.
func (r *Runner) serviceLoop() {
	defer r.bgWG.Done()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.svcPoke:
		}
		r.syncServices(r.ctx)
	}
}

// desiredServicesLocked is what should be registered now: each service
// whose checks all pass and whose tasks run (every task, for a group
// service), by key. A service whose checks have not all run yet keeps what
// it has (a restored allocation's registrations stay through the agent's
// restart). With all, every service is in, whatever its health: the keys
// a finished allocation deletes.
func (r *Runner) desiredServicesLocked(all bool) map[string]*model.ServiceRegistration {
	out := map[string]*model.ServiceRegistration{}
	g := r.group()
	if g == nil || (!all && (r.alloc.ClientStatus.Terminal() || r.intent == model.DesiredStop)) {
		return out
	}
	// checksPass: every check passes; known: every check has run.
	checksPass := func(prefix string, n int) (pass, known bool) {
		pass, known = true, true
		for j := range n {
			key := fmt.Sprintf("%s/%d", prefix, j)
			if err, ok := r.checks[key]; !ok || err != nil {
				pass = false
			}
			known = known && r.checkRan[key]
		}
		return pass, known
	}
	nodeAddr := "127.0.0.1"
	if n := r.cfg.Node; n != nil && n.Attributes[AttrNetworkAddress] != "" {
		nodeAddr = n.Attributes[AttrNetworkAddress]
	}
	index := 0
	add := func(t *model.Task, svc model.Service, prefix string, running bool) {
		idx := index
		index++
		pass, known := checksPass(prefix, len(svc.Checks))
		if !all && running && !pass && known {
			return
		}
		env := NewTaskEnv(r.cfg.Node, r.alloc, r.job, g, t, r.AllocDir(), "")
		reg := &model.ServiceRegistration{Name: env.Replace(svc.Name), AllocID: r.alloc.ID, JobID: r.alloc.JobID,
			Namespace: r.alloc.Namespace, Group: g.Name, NodeID: r.alloc.NodeID, Index: idx, Tags: svc.Tags}
		if t != nil {
			reg.Task = t.Name
		}
		if reg.Name == "" {
			reg.Name = r.alloc.JobID + "-" + g.Name
			if t != nil {
				reg.Name += "-" + t.Name
			}
		}
		addr, port, ok := serviceAddress(env, env.Replace(svc.Port), nodeAddr)
		if !ok {
			return
		}
		reg.Address, reg.Port = addr, port
		key := reg.Name + "/" + strconv.Itoa(idx)
		switch {
		case all || (running && pass):
			out[key] = reg
		case running && !known:
			if old, ok := r.registered[key]; ok {
				out[key] = old // health not known yet: keep what is registered
			}
		}
	}
	allRunning := true
	for _, t := range g.Tasks {
		allRunning = allRunning && (t.RunsToCompletion() || r.running[t.Name])
	}
	for i, svc := range g.Services {
		add(nil, svc, fmt.Sprintf("group/%d", i), allRunning)
	}
	for _, t := range g.Tasks {
		for i, svc := range t.Services {
			add(t, svc, fmt.Sprintf("%s/%d", t.Name, i), r.running[t.Name])
		}
	}
	return out
}

// serviceAddress resolves a service's port: a label of the allocation (the
// address it is published on), a number (at the node's address), or
// host:port.
func serviceAddress(env TaskEnv, port, nodeAddr string) (string, int, bool) {
	if p, ok := env.Port(port); ok {
		return p.HostIP, p.Value, true
	}
	if n, err := strconv.Atoi(port); err == nil && n > 0 {
		return nodeAddr, n, true
	}
	if host, ps, err := net.SplitHostPort(port); err == nil {
		if n, err := strconv.Atoi(ps); err == nil && n > 0 {
			return host, n, true
		}
	}
	return "", 0, false
}

// syncServices registers what should be and deregisters what should not.
func (r *Runner) syncServices(ctx context.Context) {
	r.mu.Lock()
	want := r.desiredServicesLocked(false)
	have := r.registered
	r.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, registrationTimeout)
	defer cancel()
	next := map[string]*model.ServiceRegistration{}
	for k, reg := range want {
		if old, ok := have[k]; ok && sameRegistration(old, reg) {
			next[k] = old
			continue
		}
		reg.UpdateTime = r.now()
		if err := r.cfg.Services.Register(wctx, reg); err != nil {
			r.log.Error("registering a service", "service", reg.Name, "err", err)
			continue
		}
		r.log.Info("service registered", "service", reg.Name, "address", net.JoinHostPort(reg.Address, strconv.Itoa(reg.Port)))
		next[k] = reg
	}
	for k, reg := range have {
		if _, keep := want[k]; keep {
			continue
		}
		if err := r.cfg.Services.Deregister(wctx, reg); err != nil {
			r.log.Error("deregistering a service", "service", reg.Name, "err", err)
			next[k] = reg // try again on the next sync
			continue
		}
		r.log.Info("service deregistered", "service", reg.Name)
	}
	r.mu.Lock()
	r.registered = next
	r.mu.Unlock()
}

func sameRegistration(a, b *model.ServiceRegistration) bool {
	x, y := *a, *b
	x.UpdateTime, y.UpdateTime = time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y)
}

// deregisterAll removes every registration a finished allocation may have,
// including those an earlier agent's runner wrote before a restart.
func (r *Runner) deregisterAll() {
	r.mu.Lock()
	have := r.desiredServicesLocked(true)
	maps.Copy(have, r.registered)
	r.registered = map[string]*model.ServiceRegistration{}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), registrationTimeout)
	defer cancel()
	for _, reg := range have {
		if err := r.cfg.Services.Deregister(ctx, reg); err != nil {
			r.log.Error("deregistering a service of a finished allocation", "service", reg.Name, "err", err)
		}
	}
}

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// DefaultAddr is the API's default listen address.
const DefaultAddr = "127.0.0.1:4646"

// NodeProvider gives this node's record as last written.
type NodeProvider interface{ Node() *model.Node }

// AllocProvider gives this node's allocations.
type AllocProvider interface {
	Allocations() []*model.Allocation
}

// JobsProvider gives the jobs this node has seen.
type JobsProvider interface{ Jobs() []JobStatus }

// RejectionProvider gives the rejections in force.
type RejectionProvider interface {
	Rejections() []wanted.Rejection
}

// PluginProvider gives the driver plugins' state (any JSON-encodable value).
type PluginProvider interface{ Plugins() any }

// PolicyProvider gives the loaded policies' state (any JSON-encodable value).
type PolicyProvider interface{ Policies() any }

// HealthProvider gives the agent's health.
type HealthProvider interface{ Health() Health }

// Health is the /v1/health answer. Status is "ok" or "degraded".
type Health struct {
	Status string            `json:"status"`
	NATS   fleet.ConnState   `json:"nats"`
	Synced bool              `json:"synced"`
	Checks map[string]string `json:"checks,omitempty"`
}

// JobStatus is one job as this node sees it.
type JobStatus struct {
	Key       string `json:"key"`
	Namespace string `json:"namespace"`
	ID        string `json:"id"`
	// Version and Revision are those of the last good declaration.
	Version  uint64 `json:"version"`
	Revision uint64 `json:"revision"`
	// Status: "running" (declared), "stopped" (stop = true), "orphaned"
	// (key gone: allocations keep running), "rejected" (never decoded).
	Status    string            `json:"status"`
	Rejection *wanted.Rejection `json:"rejection,omitempty"`
}

// Providers are the data sources of the endpoints; nil ones answer 404.
type Providers struct {
	Node       NodeProvider
	Allocs     AllocProvider
	Jobs       JobsProvider
	Rejections RejectionProvider
	Plugins    PluginProvider
	Policies   PolicyProvider
	Health     HealthProvider
	// Operator serves the rollout actions (POST /v1/deployment/...,
	// /v1/job/{job}/revert/{version}).
	Operator *Operator
	// JobWrites serves job run and stop (POST /v1/jobs,
	// /v1/job/{job}/stop).
	JobWrites *JobWrites
}

// ViewSource is what JobsFromSource and RejectionsFromSource read
// (*fleet.Source implements it).
type ViewSource interface{ View() *fleet.View }

type sourceJobs struct{ src ViewSource }

// JobsFromSource serves /v1/jobs from a fleet Source's view.
func JobsFromSource(src ViewSource) JobsProvider { return sourceJobs{src} }

func (s sourceJobs) Jobs() []JobStatus { return JobStatuses(s.src.View()) }

// JobStatuses lists the jobs of a view, sorted by key.
func JobStatuses(v *fleet.View) []JobStatus {
	out := make([]JobStatus, 0, v.Jobs.Len())
	for k, st := range v.Jobs.All() {
		ns, id, _ := wanted.ParseJobKey(k)
		js := JobStatus{Key: k, Namespace: ns, ID: id, Revision: st.Revision, Rejection: st.Rejection}
		if st.Value != nil {
			js.Version = st.Value.Version
		}
		switch wanted.OrderFor(st) {
		case wanted.OrderNone:
			if st.Rejection == nil {
				continue // deleted before ever decoding: nothing to show
			}
			js.Status = "rejected"
		case wanted.OrderRun:
			js.Status = "running"
		case wanted.OrderStop:
			js.Status = "stopped"
		case wanted.OrderKeep:
			js.Status = "orphaned"
		}
		out = append(out, js)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

type sourceRejections struct{ src ViewSource }

// RejectionsFromSource serves /v1/rejections from a fleet Source's view.
func RejectionsFromSource(src ViewSource) RejectionProvider { return sourceRejections{src} }

func (s sourceRejections) Rejections() []wanted.Rejection {
	r := s.src.View().Rejections()
	if r == nil {
		r = []wanted.Rejection{}
	}
	return r
}

// NewHandler returns the API's handler; gatherer serves /metrics.
func NewHandler(p Providers, gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	serve := func(path, what string, ok bool, get func() any) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			if !ok {
				writeJSON(w, http.StatusNotFound, map[string]string{"error": what + " not available"})
				return
			}
			writeJSON(w, http.StatusOK, get())
		})
	}
	serve("/v1/node", "node", p.Node != nil, func() any { return p.Node.Node() })
	serve("/v1/allocations", "allocations", p.Allocs != nil, func() any {
		a := p.Allocs.Allocations()
		if a == nil {
			a = []*model.Allocation{}
		}
		return a
	})
	serve("/v1/jobs", "jobs", p.Jobs != nil, func() any { return p.Jobs.Jobs() })
	serve("/v1/rejections", "rejections", p.Rejections != nil, func() any { return p.Rejections.Rejections() })
	serve("/v1/plugins", "plugins", p.Plugins != nil, func() any { return p.Plugins.Plugins() })
	serve("/v1/policies", "policies", p.Policies != nil, func() any { return p.Policies.Policies() })
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, _ *http.Request) {
		if p.Health == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "health not available"})
			return
		}
		h := p.Health.Health()
		code := http.StatusOK
		if h.Status != "ok" {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, h)
	})
	serveRollout(mux, p.Operator)
	serveJobWrites(mux, p.JobWrites)
	if gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Config configures Serve.
type Config struct {
	// Addr is host:port; default DefaultAddr.
	Addr string
	// AllowNonLoopback permits listening beyond loopback.
	AllowNonLoopback bool
	// Token is the bearer token RequireToken checks; a non-loopback
	// listener needs one.
	Token string
}

// Listen opens the API's listener, refusing a non-loopback host unless
// allowed.
func Listen(cfg Config) (net.Listener, error) {
	addr := cfg.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("HTTP API address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		if !cfg.AllowNonLoopback {
			return nil, fmt.Errorf("HTTP API address %q is not loopback (http.allow_non_loopback = true makes it a choice)", addr)
		}
		if cfg.Token == "" {
			return nil, fmt.Errorf("HTTP API address %q is not loopback and the API has no token: anyone who reaches it could run jobs (remove http.insecure_no_auth)", addr)
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("HTTP API: listening on %s: %w", addr, err)
	}
	return l, nil
}

// Serve serves h on l until ctx ends, then shuts down gracefully (bounded
// by 5 s).
func Serve(ctx context.Context, l net.Listener, h http.Handler, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	log.Info("HTTP API listening", "addr", l.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("HTTP API: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("HTTP API: shutting down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

package dockertest

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// HoldingEngine is a proxy in front of the Docker engine's socket that,
// once armed, lets one container start through and then holds the next
// inspect of that container unanswered until the caller goes away, and
// says which container it holds: the moment a driver's StartTask has a
// running container and has not returned its handle yet, where a plugin
// killed leaves a container nobody tracks. Point a driver (or the agent
// whose plugins inherit its environment) at Host.
type HoldingEngine struct {
	sock  string
	mu    sync.Mutex
	armed bool
	start string // the container whose start went through while armed
	held  chan string
}

var (
	startPath   = regexp.MustCompile(`^(/v[0-9.]+)?/containers/([^/]+)/start$`)
	inspectPath = regexp.MustCompile(`^(/v[0-9.]+)?/containers/([^/]+)/json$`)
)

// NewHoldingEngine serves the proxy until the test ends.
func NewHoldingEngine(t testing.TB) *HoldingEngine {
	t.Helper()
	target := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		target = strings.TrimPrefix(h, "unix://")
	}
	dir, err := os.MkdirTemp("", "hve") // short: Unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	h := &HoldingEngine{sock: filepath.Join(dir, "e.sock"), held: make(chan string, 1)}
	ln, err := net.Listen("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: "docker"})
	rp.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", target)
	}}
	rp.FlushInterval = -1 // log streams and waits pass through as they come
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := inspectPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodGet && h.take(m[2]) {
			h.held <- m[2]
			<-r.Context().Done() // until the process that asked is gone
			return
		}
		rp.ServeHTTP(w, r)
		if m := startPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPost {
			h.started(m[2])
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h
}

// Host is the proxy's address in DOCKER_HOST form.
func (h *HoldingEngine) Host() string { return "unix://" + h.sock }

// Arm makes the proxy hold the inspect that follows the next start.
func (h *HoldingEngine) Arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.start = true, ""
}

// Held receives the ID of the container whose inspect is held.
func (h *HoldingEngine) Held() <-chan string { return h.held }

func (h *HoldingEngine) started(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed && h.start == "" {
		h.start = id
	}
}

// take reports whether the inspect of id is the one to hold, and disarms.
func (h *HoldingEngine) take(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.armed || h.start == "" || h.start != id {
		return false
	}
	h.armed = false
	return true
}

package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultNATSPort is the port of the embedded server, the one the CLI dials
// by default.
const DefaultNATSPort = 4222

// EmbeddedConfig configures the NATS server an agent runs in its own process
// (dev mode, or no NATS URL configured).
type EmbeddedConfig struct {
	// StoreDir holds JetStream's files (required). The server takes no lock
	// on it; StartEmbedded takes one, so two agents cannot share it.
	StoreDir string
	// Host to listen on; default 127.0.0.1. Only loopback is accepted unless
	// AllowNonLoopback is set.
	Host string
	// Port for clients; 0 means DefaultNATSPort, -1 a random free port.
	Port int
	// FallbackRandomPort: when Port is taken, log a warning naming it and
	// listen on a random free port instead of failing (dev mode).
	FallbackRandomPort bool
	// ServerName must be stable across restarts of the same store (JetStream
	// ties its state to it); default "hivelet-" + the store dir's base name.
	ServerName string
	// Cluster, when set, makes this server one of a JetStream cluster.
	Cluster *ClusterConfig
	// AllowNonLoopback permits a non-loopback Host (a fleet member).
	AllowNonLoopback bool
	// Token is what every client must present (the agent's generated
	// credentials, LoadOrCreateToken). Empty: no authentication, which the
	// agent allows only when configured to and warns about.
	Token string
	// ReadyTimeout bounds the wait for the server to accept clients; default 10 s.
	ReadyTimeout time.Duration
	// Log receives the start and stop lines.
	Log *slog.Logger
}

// ClusterConfig makes an embedded server a member of a JetStream cluster.
type ClusterConfig struct {
	Name   string   // cluster name, the same on every member
	Host   string   // route listen host; default Host; loopback unless AllowNonLoopback
	Port   int      // route listen port
	Routes []string // nats-route://host:port of the members (may include itself)
}

// ErrPortInUse is returned when the embedded server's port is taken.
var ErrPortInUse = errors.New("NATS port already in use")

// Embedded is a running embedded NATS server with JetStream.
type Embedded struct {
	srv  *server.Server
	lock *os.File
	log  *slog.Logger
}

// StartEmbedded starts a NATS server with JetStream in this process and waits
// until it accepts clients. The server never installs signal handlers
// (NoSigs), so SIGTERM stays the agent's to handle.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.StoreDir == "" {
		return nil, errors.New("starting embedded NATS: no store directory")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if !cfg.AllowNonLoopback && !isLoopback(cfg.Host) {
		return nil, fmt.Errorf("starting embedded NATS: host %q is not loopback", cfg.Host)
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultNATSPort
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	if err := os.MkdirAll(cfg.StoreDir, 0o700); err != nil {
		return nil, fmt.Errorf("starting embedded NATS: creating store dir: %w", err)
	}
	abs, err := filepath.Abs(cfg.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("starting embedded NATS: %w", err)
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "hivelet-" + filepath.Base(abs)
	}
	lock, err := lockDir(abs)
	if err != nil {
		return nil, err
	}
	if cfg.Port > 0 {
		if err := portFree(cfg.Host, cfg.Port); err != nil {
			if !cfg.FallbackRandomPort {
				lock.Close()
				return nil, fmt.Errorf("starting embedded NATS on %s:%d: %w (another agent running? choose another port)", cfg.Host, cfg.Port, ErrPortInUse)
			}
			log.Warn("embedded NATS port taken; falling back to a random port (the CLI's default --nats will not reach this agent)",
				"port", cfg.Port, "err", err)
			cfg.Port = server.RANDOM_PORT
		}
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   abs,
		NoSigs:     true,
		NoLog:      true,
		// Token auth covers client connections, in-process ones included;
		// routes between cluster members are not clients.
		Authorization: cfg.Token,
	}
	if c := cfg.Cluster; c != nil {
		opts.Cluster.Name = c.Name
		opts.Cluster.Host = c.Host
		if opts.Cluster.Host == "" {
			opts.Cluster.Host = cfg.Host
		}
		if !cfg.AllowNonLoopback && !isLoopback(opts.Cluster.Host) {
			lock.Close()
			return nil, fmt.Errorf("starting embedded NATS: cluster host %q is not loopback", opts.Cluster.Host)
		}
		opts.Cluster.Port = c.Port
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				lock.Close()
				return nil, fmt.Errorf("starting embedded NATS: route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("starting embedded NATS: %w", err)
	}
	go srv.Start()
	deadline := time.Now().Add(cfg.ReadyTimeout)
	for !srv.ReadyForConnections(50 * time.Millisecond) {
		if ctx.Err() != nil || time.Now().After(deadline) {
			srv.Shutdown()
			srv.WaitForShutdown()
			lock.Close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("starting embedded NATS: %w", ctx.Err())
			}
			return nil, fmt.Errorf("starting embedded NATS: not ready after %s", cfg.ReadyTimeout)
		}
	}
	log.Info("embedded NATS server started", "url", srv.ClientURL(), "store_dir", abs, "server_name", cfg.ServerName)
	return &Embedded{srv: srv, lock: lock, log: log}, nil
}

// Server returns the server, for nats.InProcessServer (ConnConfig.InProcess).
func (e *Embedded) Server() *server.Server { return e.srv }

// ClientURL is the nats:// URL other processes (the CLI, other agents) dial.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Port is the client port actually listened on.
func (e *Embedded) Port() int {
	if a, ok := e.srv.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// Shutdown stops the server, waits for it to finish, and releases the store
// directory's lock. Safe to call more than once.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	if e.lock != nil {
		e.lock.Close()
		e.lock = nil
		e.log.Info("embedded NATS server stopped")
	}
}

// lockDir takes an exclusive, non-blocking flock on dir/.hivelet-nats.lock.
// The lock dies with the process, so a crashed agent leaves no stale lock.
func lockDir(dir string) (*os.File, error) {
	p := filepath.Join(dir, ".hivelet-nats.lock")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking NATS store dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking NATS store dir %s: another process holds it: %w", dir, err)
	}
	return f, nil
}

func portFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// WaitJetStream blocks until this server's JetStream can place a stream of
// `peers` replicas: it has a meta leader and (clustered) at least `peers`
// servers, this one included, are online members of the meta group. A
// single server is ready once JetStream is enabled; peers > 1 there can never
// be met and fails at once. It logs every few seconds while waiting (another
// member not started yet is the usual cause) and ends with ctx.
func (e *Embedded) WaitJetStream(ctx context.Context, peers int) error {
	if !e.srv.JetStreamIsClustered() {
		if peers > 1 {
			return fmt.Errorf("waiting for JetStream: %d replicas need a cluster; this embedded server has none", peers)
		}
		if !e.srv.JetStreamEnabled() {
			return errors.New("waiting for JetStream: not enabled")
		}
		return nil
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastLog := time.Now()
	for {
		online, leader := e.jetStreamPeers()
		if leader != "" && online >= peers {
			e.log.Info("JetStream cluster ready", "meta_leader", leader, "online_peers", online)
			return nil
		}
		if time.Since(lastLog) >= 5*time.Second {
			e.log.Info("waiting for the JetStream cluster (are the other members started?)",
				"meta_leader", leader, "online_peers", online, "want_peers", peers)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for JetStream cluster of %d peers (meta leader %q, %d online): %w", peers, leader, online, ctx.Err())
		case <-tick.C:
		}
	}
}

// jetStreamPeers is the meta leader's name ("" while none is known) and how
// many meta group members, this server included, are online.
func (e *Embedded) jetStreamPeers() (int, string) {
	if !e.srv.JetStreamIsCurrent() {
		return 0, ""
	}
	jsi, err := e.srv.Jsz(nil)
	if err != nil || jsi.Meta == nil {
		return 0, ""
	}
	online := 1
	for _, p := range jsi.Meta.Replicas {
		if !p.Offline {
			online++
		}
	}
	return online, jsi.Meta.Leader
}

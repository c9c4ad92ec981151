package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultRequestTimeout is the deadline of one KV or JetStream request.
const DefaultRequestTimeout = 5 * time.Second

// ConnConfig says how an agent (or the CLI) reaches NATS.
type ConnConfig struct {
	// URLs of the NATS servers; ignored when InProcess is set.
	URLs []string
	// InProcess connects to an embedded server without a socket.
	InProcess nats.InProcessConnProvider
	// CredsFile is a NATS credentials (JWT + seed) file.
	CredsFile string
	// NKeySeedFile is an NKey seed file.
	NKeySeedFile string
	// Token authenticates to a server that requires one: an agent's
	// embedded server does by default (credentials.go).
	Token string
	// TLS files; CAFile alone verifies the server, CertFile+KeyFile add a
	// client certificate.
	CAFile, CertFile, KeyFile string
	// Name is the connection name the server shows; default "hivelet".
	Name string
	// RequestTimeout is every request's deadline; default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// FailFast makes Connect fail when no server answers at once (the CLI);
	// an agent leaves it false and keeps retrying in the background.
	FailFast bool
}

// ConnState is the NATS connection state, as shown by the API and metrics.
type ConnState string

// Connection states.
const (
	StateConnected    ConnState = "connected"
	StateReconnecting ConnState = "reconnecting"
	StateClosed       ConnState = "closed"
)

// ConnStates lists every ConnState (the metric has one series per state).
var ConnStates = []ConnState{StateConnected, StateReconnecting, StateClosed}

// Conn is the one NATS connection of an agent, shared by watches,
// heartbeats, status writes and the policy engine. It reconnects forever with
// jittered backoff.
type Conn struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	obsv    atomic.Pointer[observerBox]
	timeout time.Duration

	mu     sync.Mutex
	hooks  map[int]func()
	nextID int
}

// Connect opens the connection. With FailFast unset it returns at once even
// when no server answers yet: the connection retries in the background and
// requests fail by their deadline meanwhile.
func Connect(ctx context.Context, cfg ConnConfig, log *slog.Logger, obs Observer) (*Conn, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Conn{log: log, timeout: cfg.RequestTimeout, hooks: map[int]func(){}}
	c.obsv.Store(&observerBox{observerOr(obs)})
	if c.timeout <= 0 {
		c.timeout = DefaultRequestTimeout
	}
	name := cfg.Name
	if name == "" {
		name = "hivelet"
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.Timeout(c.timeout),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			return backoff(attempts, 50*time.Millisecond, 2*time.Second)
		}),
		nats.ReconnectBufSize(8 << 20),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.obs().ConnState(StateReconnecting)
			if err != nil {
				c.log.Warn("NATS connection lost; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.obs().ConnState(StateConnected)
			c.log.Info("NATS connection re-established", "url", nc.ConnectedUrlRedacted())
			c.runHooks()
		}),
		nats.ConnectHandler(func(nc *nats.Conn) {
			c.obs().ConnState(StateConnected)
			c.log.Info("NATS connected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(*nats.Conn) { c.obs().ConnState(StateClosed) }),
		// A write the server's permissions refuse gets no answer: the
		// request ends by its deadline, and only this says why.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.log.Error("NATS server reported an error", "err", err)
		}),
	}
	if !cfg.FailFast {
		opts = append(opts, nats.RetryOnFailedConnect(true))
	}
	if cfg.InProcess != nil {
		opts = append(opts, nats.InProcessServer(cfg.InProcess))
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("connecting to NATS: reading NKey seed: %w", err)
		}
		opts = append(opts, o)
	}
	if cfg.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.CAFile))
	}
	if cfg.CertFile != "" || cfg.KeyFile != "" {
		opts = append(opts, nats.ClientCert(cfg.CertFile, cfg.KeyFile))
	}
	url := strings.Join(cfg.URLs, ",")
	if url == "" && cfg.InProcess == nil {
		url = nats.DefaultURL
	}
	c.obs().ConnState(StateReconnecting)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(c.timeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	c.nc, c.js = nc, js
	if nc.IsConnected() {
		c.obs().ConnState(StateConnected)
	}
	return c, nil
}

type observerBox struct{ o Observer }

func (c *Conn) obs() Observer { return c.obsv.Load().o }

// SetObserver replaces the observer given to Connect (metrics are often
// created after the connection) and reports the current state to it at once.
func (c *Conn) SetObserver(o Observer) {
	c.obsv.Store(&observerBox{observerOr(o)})
	c.obs().ConnState(c.State())
}

// NATS returns the underlying connection.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream returns the JetStream context on the shared connection (for the
// policy engine's object store, among others).
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// RequestTimeout is the deadline every request made through this package has.
func (c *Conn) RequestTimeout() time.Duration { return c.timeout }

// State returns the connection's current state.
func (c *Conn) State() ConnState {
	switch c.nc.Status() {
	case nats.CONNECTED, nats.DRAINING_PUBS, nats.DRAINING_SUBS:
		return StateConnected
	case nats.CLOSED:
		return StateClosed
	}
	return StateReconnecting
}

// OnReconnect registers f to run (in its own goroutine) after every
// reconnect; the returned func unregisters it.
func (c *Conn) OnReconnect(f func()) (remove func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.nextID
	c.nextID++
	c.hooks[id] = f
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.hooks, id)
	}
}

func (c *Conn) runHooks() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.hooks {
		go f()
	}
}

// Close closes the connection (after flushing, bounded by the request timeout).
func (c *Conn) Close() {
	if c.nc.IsConnected() {
		_ = c.nc.FlushTimeout(c.timeout)
	}
	c.nc.Close()
}

// withTimeout derives a request context carrying the connection's deadline.
func (c *Conn) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// withLongerTimeout is withTimeout, except that a caller's deadline later
// than the request timeout is kept: a heartbeat waits for its answer as
// long as its period allows (node.HeartbeatConfig.WriteTimeout), since one
// written again lands twice and reaches every watcher twice.
func (c *Conn) withLongerTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > c.timeout {
		return context.WithCancel(ctx)
	}
	return c.withTimeout(ctx)
}

// backoff is a capped exponential backoff with full jitter.
func backoff(attempt int, base, max time.Duration) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	if attempt > 16 {
		attempt = 16
	}
	d := base << attempt
	if d > max || d <= 0 {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/api"
	"github.com/hivelet/hivelet/host/fleet"
	"github.com/hivelet/hivelet/internal/testutil"
)

// silentLink is a TCP proxy that can hold every byte in both directions
// without closing anything: a partition the client does not notice (its
// connection stays "connected" until its pings time out, minutes later).
type silentLink struct {
	ln   net.Listener
	to   string
	mu   sync.Mutex
	open chan struct{} // closed while bytes flow
}

func newSilentLink(t *testing.T, to string) *silentLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &silentLink{ln: ln, to: to, open: make(chan struct{})}
	close(l.open)
	t.Cleanup(func() { l.heal(); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			go l.pump(up, c)
			go l.pump(c, up)
		}
	}()
	return l
}

func (l *silentLink) url() string { return "nats://" + l.ln.Addr().String() }

func (l *silentLink) gate() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// cut holds the bytes from now on.
func (l *silentLink) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
		l.open = make(chan struct{})
	default:
	}
}

// heal lets the held bytes, and the rest, through.
func (l *silentLink) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
	default:
		close(l.open)
	}
}

func (l *silentLink) pump(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-l.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// health is the agent's /v1/health answer and status code.
func (p *agentProc) health() (int, api.Health) {
	var h api.Health
	resp, err := http.Get("http://" + p.apiAddr + "/v1/health")
	if err != nil {
		return 0, h
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&h)
	return resp.StatusCode, h
}

// The fault of issue 11 (5), end to end: during a silent partition from
// NATS (nothing closed, nothing answered) /v1/health said ok, connected
// and synced while the node record expired fleet-wide. Now the failing
// heartbeats make it 503 "degraded" with the heartbeat's reason, and the
// health metric says so while the connection state still reads
// "connected"; once the link heals, health is ok again.
func TestEndToEndASilentPartitionFromNATSMakesHealthNotOKWithTheReason(t *testing.T) {
	// Parallel: its time is heartbeats failing and recovering through a
	// link to a NATS server, both its own, as are its agent, ports and
	// directories.
	t.Parallel()
	hiveletBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	port := testutil.FreePort(t)
	emb, err := fleet.StartEmbedded(ctx, fleet.EmbeddedConfig{StoreDir: t.TempDir(), Port: port, ServerName: "e2e-partition"})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	link := newSilentLink(t, fmt.Sprintf("127.0.0.1:%d", port))
	p := newAgent(t, link.url())
	p.writeConfig(fmt.Sprintf("http {\n  address = %q\n}\nnats {\n  urls = [%q]\n  node_ttl = \"3s\"\n  request_timeout = \"1s\"\n}\n", p.apiAddr, link.url()))
	p.start()
	if code, h := p.health(); code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("before the partition: %d %+v", code, h)
	}

	link.cut()
	cutAt := time.Now()
	var h api.Health
	testutil.Eventually(t, 15*time.Second, "health not ok during the partition", func() bool {
		var code int
		code, h = p.health()
		return code == http.StatusServiceUnavailable && strings.Contains(h.Checks[api.CheckHeartbeat], "heartbeat failing")
	})
	t.Logf("health degraded %v after the cut: %+v", time.Since(cutAt).Round(time.Millisecond), h)
	if h.NATS != fleet.StateConnected {
		t.Logf("the client noticed the partition itself (%s): the fault is less silent than intended", h.NATS)
	}
	testutil.Eventually(t, 10*time.Second, "the health metric", func() bool { return p.metric(`hivelet_health_failing{check="heartbeat"}`) == 1 })

	link.heal()
	healedAt := time.Now()
	testutil.Eventually(t, 15*time.Second, "health ok after the link heals", func() bool {
		code, h := p.health()
		return code == http.StatusOK && h.Status == "ok"
	})
	t.Logf("health ok %v after the link healed", time.Since(healedAt).Round(time.Millisecond))
}

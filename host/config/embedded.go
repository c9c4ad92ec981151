package config

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// ResolvedCluster is nats.embedded.cluster with its listen address split and
// its routes normalised to nats-route://host:port.
type ResolvedCluster struct {
	Name   string
	Host   string
	Port   int
	Routes []string
}

// validateEmbedded checks nats.embedded and the replica count against what
// the embedded server (or cluster) can hold. pos locates an attribute inside
// nested blocks for the error position.
func validateEmbedded(n *NATS, pos func(attr string, blocks ...string) *hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	bad := func(summary, detail string, at *hcl.Range) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: at})
	}
	e := n.Embedded
	if e == nil {
		// No embedded block: a single embedded server holds one replica.
		if len(n.URLs) == 0 && n.Replicas > 1 {
			bad("too many replicas", fmt.Sprintf("nats.replicas = %d: one embedded server holds 1 replica; add nats.embedded.cluster or nats.urls", n.Replicas), pos("replicas", "nats"))
		}
		return diags
	}
	if len(n.URLs) > 0 {
		bad("embedded server with urls", "nats.embedded configures the agent's own NATS server, which runs only without nats.urls: remove one of them", pos("urls", "nats"))
	}
	if e.Port < 0 || e.Port > 65535 {
		bad("invalid port", fmt.Sprintf("nats.embedded.port = %d", e.Port), pos("port", "nats", "embedded"))
	}
	if e.Port != 0 && n.EmbeddedPort != 0 && e.Port != n.EmbeddedPort {
		bad("conflicting ports", fmt.Sprintf("nats.embedded_port = %d and nats.embedded.port = %d: set one", n.EmbeddedPort, e.Port), pos("port", "nats", "embedded"))
	}
	if e.Host != "" && !e.AllowNonLoopback && !isLoopback(e.Host) {
		bad("non-loopback listener", fmt.Sprintf("nats.embedded.host = %q is not loopback: set allow_non_loopback = true to serve other hosts", e.Host), pos("host", "nats", "embedded"))
	}
	if strings.ContainsAny(e.ServerName, " \t\n") {
		bad("invalid server name", fmt.Sprintf("nats.embedded.server_name = %q: no spaces", e.ServerName), pos("server_name", "nats", "embedded"))
	}
	c := e.Cluster
	if c == nil {
		if n.Replicas > 1 {
			bad("too many replicas", fmt.Sprintf("nats.replicas = %d: one embedded server holds 1 replica; add nats.embedded.cluster", n.Replicas), pos("replicas", "nats"))
		}
		return diags
	}
	at := func(attr string) *hcl.Range { return pos(attr, "nats", "embedded", "cluster") }
	if c.Name == "" {
		bad("cluster without a name", "nats.embedded.cluster.name is required (the same on every member)", at("name"))
	} else if strings.ContainsAny(c.Name, " \t\n") {
		bad("invalid cluster name", fmt.Sprintf("nats.embedded.cluster.name = %q: no spaces", c.Name), at("name"))
	}
	self := ""
	if c.Listen == "" {
		bad("cluster without a listen address", "nats.embedded.cluster.listen = \"host:port\" is required: the other members route to it", at("listen"))
	} else if host, port, err := splitHostPort(c.Listen); err != nil {
		bad("invalid cluster listen address", fmt.Sprintf("nats.embedded.cluster.listen = %q: %v", c.Listen, err), at("listen"))
	} else {
		self = net.JoinHostPort(host, strconv.Itoa(port))
		if !e.AllowNonLoopback && !isLoopback(host) {
			bad("non-loopback listener", fmt.Sprintf("nats.embedded.cluster.listen = %q is not loopback: set nats.embedded.allow_non_loopback = true to route with other hosts", c.Listen), at("listen"))
		}
	}
	if len(c.Routes) == 0 {
		// A clustered server with no route never turns ready: every member
		// lists the members, itself included if it likes.
		bad("cluster without routes", "nats.embedded.cluster.routes lists the members' route addresses (the same list on every member; a route to itself is ignored)", at("routes"))
	}
	members := map[string]bool{}
	if self != "" {
		members[self] = true
	}
	for _, r := range c.Routes {
		hp, err := routeHostPort(r)
		if err != nil {
			bad("invalid route", fmt.Sprintf("nats.embedded.cluster.routes: %q: %v", r, err), at("routes"))
			continue
		}
		members[hp] = true
	}
	// A hint only: two spellings of one member count twice.
	if n.Replicas > len(members) && self != "" {
		bad("too many replicas", fmt.Sprintf("nats.replicas = %d but the cluster names %d member(s) (listen and routes)", n.Replicas, len(members)), pos("replicas", "nats"))
	}
	return diags
}

// resolveEmbedded fills the embedded server's settings in r (StateDir set).
func (r *Resolved) resolveEmbedded(e *EmbeddedServer) error {
	r.EmbeddedHost = "127.0.0.1"
	r.EmbeddedStoreDir = filepath.Join(r.StateDir, "nats")
	if e == nil {
		return nil
	}
	if e.Host != "" {
		r.EmbeddedHost = e.Host
	}
	if e.Port != 0 {
		r.EmbeddedPort = e.Port
	}
	if e.StoreDir != "" {
		r.EmbeddedStoreDir = e.StoreDir
	}
	r.EmbeddedAllowNonLoopback = e.AllowNonLoopback
	r.EmbeddedNoAuth = e.InsecureNoAuth
	r.EmbeddedServerName = e.ServerName
	if c := e.Cluster; c != nil {
		host, port, err := splitHostPort(c.Listen)
		if err != nil {
			return fmt.Errorf("nats.embedded.cluster.listen: %w", err)
		}
		rc := &ResolvedCluster{Name: c.Name, Host: host, Port: port}
		for _, rt := range c.Routes {
			hp, err := routeHostPort(rt)
			if err != nil {
				return fmt.Errorf("nats.embedded.cluster.routes: %q: %w", rt, err)
			}
			rc.Routes = append(rc.Routes, "nats-route://"+hp)
		}
		r.Cluster = rc
	}
	return nil
}

// splitHostPort parses host:port with a port from 1 to 65535; an empty host
// means every interface (0.0.0.0).
func splitHostPort(s string) (string, int, error) {
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("want host:port: %w", err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("port %q: want 1 to 65535", ps)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// routeHostPort accepts host:port or nats-route://host:port and returns
// host:port.
func routeHostPort(r string) (string, error) {
	s := r
	if i := strings.Index(s, "://"); i >= 0 {
		if scheme := s[:i]; scheme != "nats-route" && scheme != "nats" {
			return "", fmt.Errorf("scheme %q: want nats-route://", scheme)
		}
		s = s[i+3:]
	}
	host, port, err := splitHostPort(s)
	if err != nil {
		return "", err
	}
	if host == "0.0.0.0" {
		return "", fmt.Errorf("a route needs a host")
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// findPath locates attr inside nested blocks (e.g. "nats", "embedded",
// "cluster") for error positions; falling back to the innermost block found,
// then the file start.
func findPath(f *hcl.File, filename, attr string, blocks ...string) *hcl.Range {
	bodies := []hcl.Body{f.Body}
	var last *hcl.Range
	for _, typ := range blocks {
		var next []hcl.Body
		for _, b := range bodies {
			content, _, _ := b.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: typ}}})
			if content == nil {
				continue
			}
			for _, blk := range content.Blocks {
				r := blk.DefRange
				last = &r
				next = append(next, blk.Body)
			}
		}
		bodies = next
	}
	for _, b := range bodies {
		attrs, _ := b.JustAttributes()
		if a, ok := attrs[attr]; ok {
			r := a.Range
			return &r
		}
	}
	if last != nil {
		return last
	}
	return &hcl.Range{Filename: filename, Start: hcl.Pos{Line: 1, Column: 1}}
}

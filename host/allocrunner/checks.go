package allocrunner

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// checkTarget resolves where a check connects: the check's port, else its
// service's port, after interpolation. A port is a label of the group's
// network (the address the node published it on), a number ("8080", on
// loopback) or a "host:port".
func checkTarget(env TaskEnv, svc model.Service, c model.Check) (string, error) {
	port := c.Port
	if port == "" {
		port = svc.Port
	}
	port = env.Replace(port)
	if port == "" {
		return "", fmt.Errorf("check %q has no port", c.Name)
	}
	if p, ok := env.Port(port); ok {
		return p.Addr(), nil
	}
	if _, err := strconv.Atoi(port); err == nil {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	if _, _, err := net.SplitHostPort(port); err == nil {
		return port, nil
	}
	return "", fmt.Errorf("check %q: port %q is neither a port label of the allocation, a number nor host:port", c.Name, port)
}

// runCheck performs one check with its timeout. nil means passing.
func runCheck(ctx context.Context, env TaskEnv, svc model.Service, c model.Check) error {
	addr, err := checkTarget(env, svc, c)
	if err != nil {
		return err
	}
	timeout := c.Timeout.D()
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch c.Type {
	case model.CheckTCP:
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("tcp check %s: %w", addr, err)
		}
		return conn.Close()
	case model.CheckHTTP:
		path := env.Replace(c.Path)
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return fmt.Errorf("http check: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("http check %s: %w", req.URL, err)
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("http check %s: status %d", req.URL, resp.StatusCode)
		}
		return nil
	default:
		return fmt.Errorf("check type %q not supported", c.Type)
	}
}

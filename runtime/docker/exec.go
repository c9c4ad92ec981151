package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// Exec runs cmd in the running container id, as its configured user,
// and returns its exit code and its stdout and stderr, interleaved and cut
// at max bytes. ctx bounds the whole run: when it ends first, Exec returns
// its error (the engine has no call to stop an exec'd process; it ends
// with the container, or by itself).
func (c *Client) Exec(ctx context.Context, id string, cmd []string, max int) (int, []byte, error) {
	cr, err := c.api.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, nil, fmt.Errorf("creating an exec in container %s: %w", short(id), notFound(err))
	}
	hj, err := c.api.ContainerExecAttach(ctx, cr.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, nil, fmt.Errorf("starting an exec in container %s: %w", short(id), notFound(err))
	}
	defer hj.Close()
	out := &capped{max: max}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(out, out, hj.Reader)
		copied <- err
	}()
	select {
	case err := <-copied:
		if err != nil && err != io.EOF {
			return 0, out.bytes(), fmt.Errorf("reading an exec's output in container %s: %w", short(id), err)
		}
	case <-ctx.Done():
		hj.Close()
		return 0, out.bytes(), fmt.Errorf("exec in container %s: %w", short(id), ctx.Err())
	}
	ins, err := c.api.ContainerExecInspect(ctx, cr.ID)
	if err != nil {
		return 0, out.bytes(), fmt.Errorf("inspecting an exec in container %s: %w", short(id), err)
	}
	return ins.ExitCode, out.bytes(), nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capped) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf.Bytes()...)
}

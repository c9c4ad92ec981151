package exec

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/sdk/driver"
)

// TestATaskWithAHostVolumeMountIsRefusedNamingThePath: the exec driver has
// no mount namespace to mount a host volume into, so it refuses the task
// with a config error naming the volume's path, starting nothing; the same
// task without the mount starts (the control).
func TestATaskWithAHostVolumeMountIsRefusedNamingThePath(t *testing.T) {
	d := asTheTestsUser()
	ctx := context.Background()
	tc := taskCfg(t, "mounted", map[string]any{"command": "/bin/true"})
	tc.Mounts = []driver.Mount{{HostPath: "/srv/data", TaskPath: "/data", ReadOnly: true}}
	_, err := d.StartTask(ctx, tc)
	var ce *driver.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "volume_mount[0]: the exec driver runs tasks without a mount namespace of their own, so it cannot mount /srv/data at /data") {
		t.Fatalf("err = %v, want a config error naming the mount", err)
	}
	if _, err := d.InspectTask(ctx, tc.ID); err == nil {
		t.Fatal("the refused task exists")
	}

	tc.Mounts = nil
	if _, err := d.StartTask(ctx, tc); err != nil {
		t.Fatalf("without the mount: %v", err)
	}
	if r := waitExit(t, d, tc.ID, 10*time.Second); !r.Successful() {
		t.Fatalf("exit %+v", r)
	}
}

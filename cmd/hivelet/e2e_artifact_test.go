package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/internal/testutil"
)

// toolTarGz is a release tarball the way exporters ship them: a directory
// holding an executable.
func toolTarGz(t *testing.T, script string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range []*tar.Header{
		{Name: "tool-1.0/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "tool-1.0/tool", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(script))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tw.Write([]byte(script)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func artifactJobHCL(url, checksum, deadline string) string {
	return fmt.Sprintf(`job "fetched" {
  type = "system"
  update {
    min_healthy_time = "300ms"
    healthy_deadline = %q
  }
  group "g" {
    task "tool" {
      driver = "exec"
      artifact {
        source = %q
        options {
          checksum = %q
        }
      }
      config {
        command = "local/tool-1.0/tool"
      }
      kill_timeout = "2s"
    }
  }
}
`, deadline, url, checksum)
}

// TestEndToEndAnArtifactIsFetchedUnpackedAndRun: the exec task's command is
// the executable of a tarball served over loopback HTTP, checked against
// its sha256; the deployment succeeds and the tool's output is in alloc
// logs. A wrong checksum fails the deployment naming the mismatch.
func TestEndToEndAnArtifactIsFetchedUnpackedAndRun(t *testing.T) {
	archive := toolTarGz(t, "#!/bin/sh\necho \"tool fetched into $NOMAD_TASK_DIR\"\nexec sleep 600\n")
	sum := sha256.Sum256(archive)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/tool-1.0.linux-amd64.tar.gz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(archive)
	}))
	defer srv.Close()
	p := newAgent(t, "")
	p.start()
	dir := t.TempDir()
	url := srv.URL + "/tool-1.0.linux-amd64.tar.gz"
	if code, out := p.cli("job", "run", e2eFile(t, dir, "fetched.hcl", artifactJobHCL(url, "sha256:"+hex.EncodeToString(sum[:]), "30s"))); code != 0 || !strings.Contains(out, "deployment successful") {
		t.Fatalf("job run: exit %d\n%s", code, out)
	}
	live := liveOf(p.allocs(), "fetched")
	if len(live) != 1 {
		t.Fatalf("live: %+v", live)
	}
	testutil.Eventually(t, 20*time.Second, "the tool's output", func() bool {
		code, out := p.cli("alloc", "logs", live[0].ID, "tool")
		return code == 0 && strings.Contains(out, "tool fetched into ") && strings.Contains(out, "/tool")
	})

	code, out := p.cli("job", "run", e2eFile(t, dir, "bad.hcl", artifactJobHCL(url, "sha256:"+strings.Repeat("0", 64), "3s")))
	// job run itself says why: the failing allocation, its node, and the
	// task's artifact event.
	if code == 0 || !strings.Contains(out, "failing allocations of version") ||
		!strings.Contains(out, "task tool: Failed Artifact Download: ") || !strings.Contains(out, "checksum mismatch") {
		t.Fatalf("job run with a wrong checksum: exit %d, want the deployment failed naming the mismatch\n%s", code, out)
	}
	var mismatch bool
	for _, a := range p.allocs() {
		ts := a.TaskStates["tool"]
		if ts == nil {
			continue
		}
		for _, e := range ts.Events {
			mismatch = mismatch || (e.Type == "Failed Artifact Download" && strings.Contains(e.Message, "checksum mismatch"))
		}
	}
	if !mismatch {
		t.Errorf("no allocation has a Failed Artifact Download event naming the checksum mismatch")
	}
	if code, out := p.cli("job", "stop", "fetched"); code != 0 {
		t.Fatalf("job stop: exit %d\n%s", code, out)
	}
}

package artifact_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/artifact"
	"github.com/hivelet/hivelet/host/model"
)

type entry struct {
	name, body, link string
	mode             int64
}

func tarGz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if e.link != "" {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// serve answers each path with its bytes over loopback and records the
// headers of the last request.
func serve(t *testing.T, files map[string][]byte) (string, *http.Header) {
	t.Helper()
	var last http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last = r.Header.Clone()
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &last
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAnArchiveIsUnpackedIntoTheDestinationWithItsModes(t *testing.T) {
	archive := tarGz(t, entry{name: "app-1.0/"}, entry{name: "app-1.0/app", body: "#!/bin/sh\necho hi\n", mode: 0o755},
		entry{name: "app-1.0/README", body: "read me"}, entry{name: "app-1.0/current", link: "app"})
	base, _ := serve(t, map[string][]byte{"/app-1.0.tar.gz": archive})
	dir := t.TempDir()
	written, err := artifact.Fetcher{}.Fetch(context.Background(), model.Artifact{Source: base + "/app-1.0.tar.gz"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(written, []string{"local/app-1.0"}) {
		t.Errorf("written %v, want [local/app-1.0]", written)
	}
	st, err := os.Stat(filepath.Join(dir, "local/app-1.0/app"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("the executable: %v %v", st, err)
	}
	if got := read(t, filepath.Join(dir, "local/app-1.0/current")); !strings.Contains(got, "echo hi") {
		t.Errorf("the link reads %q", got)
	}
	if got := read(t, filepath.Join(dir, "local/app-1.0/README")); got != "read me" {
		t.Errorf("README %q", got)
	}
}

func TestAPlainFileIsSavedByItsNameOrAsTheDestinationInFileMode(t *testing.T) {
	base, hdr := serve(t, map[string][]byte{"/conf/app.yaml": []byte("a: 1\n"), "/x.tar.gz": []byte("not an archive")})
	dir := t.TempDir()
	f := artifact.Fetcher{}
	if _, err := f.Fetch(context.Background(), model.Artifact{Source: base + "/conf/app.yaml", Destination: "local/conf",
		Headers: map[string]string{"X-Token": "t0k"}}, dir); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "local/conf/app.yaml")); got != "a: 1\n" {
		t.Errorf("saved %q", got)
	}
	if (*hdr).Get("X-Token") != "t0k" {
		t.Errorf("the request's headers %v lack X-Token", *hdr)
	}
	// mode file keeps even a .tar.gz as it is, at the destination's path.
	if _, err := f.Fetch(context.Background(), model.Artifact{Source: base + "/x.tar.gz", Destination: "local/blob", Mode: model.ArtifactFile}, dir); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "local/blob")); got != "not an archive" {
		t.Errorf("file mode saved %q", got)
	}
	// Control: the same source in the default mode is unpacked, and fails.
	if _, err := f.Fetch(context.Background(), model.Artifact{Source: base + "/x.tar.gz"}, dir); err == nil || !strings.Contains(err.Error(), "unpacking tar.gz") {
		t.Errorf("a broken archive: %v", err)
	}
}

func TestTheChecksumDecidesWhetherTheDownloadIsKept(t *testing.T) {
	body := []byte("payload")
	sum := sha256.Sum256(body)
	base, _ := serve(t, map[string][]byte{"/p.bin": body})
	dir := t.TempDir()
	good := model.Artifact{Source: base + "/p.bin", Options: map[string]string{"checksum": "sha256:" + hex.EncodeToString(sum[:])}}
	if _, err := (artifact.Fetcher{}).Fetch(context.Background(), good, dir); err != nil {
		t.Fatalf("the right checksum: %v", err)
	}
	bad := model.Artifact{Source: base + "/p.bin", Destination: "other", Options: map[string]string{"checksum": "sha256:" + strings.Repeat("0", 64)}}
	_, err := artifact.Fetcher{}.Fetch(context.Background(), bad, dir)
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("a wrong checksum: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other/p.bin")); !os.IsNotExist(err) {
		t.Errorf("a download failing its checksum was kept: %v", err)
	}
}

func TestAnArchiveEntryLeavingTheDestinationFailsTheFetch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		archive func(t *testing.T) []byte
		file    string
	}{
		{"dot-dot in a tar", func(t *testing.T) []byte { return tarGz(t, entry{name: "../../escaped", body: "x"}) }, "a.tgz"},
		{"a link pointing out", func(t *testing.T) []byte { return tarGz(t, entry{name: "l", link: "../../../etc"}) }, "a.tgz"},
		{"dot-dot in a zip", func(t *testing.T) []byte { return zipOf(t, map[string]string{"../escaped": "x"}) }, "a.zip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := serve(t, map[string][]byte{"/" + tc.file: tc.archive(t)})
			root := t.TempDir()
			dir := filepath.Join(root, "task")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := artifact.Fetcher{}.Fetch(context.Background(), model.Artifact{Source: base + "/" + tc.file}, dir)
			if err == nil || !strings.Contains(err.Error(), "outside the destination") {
				t.Fatalf("got %v, want the entry refused", err)
			}
			if _, err := os.Stat(filepath.Join(root, "escaped")); !os.IsNotExist(err) {
				t.Errorf("a file was written outside: %v", err)
			}
		})
	}
	// Control: a zip whose entries stay inside is unpacked.
	base, _ := serve(t, map[string][]byte{"/ok.zip": zipOf(t, map[string]string{"bin/tool": "t"})})
	dir := t.TempDir()
	if _, err := (artifact.Fetcher{}).Fetch(context.Background(), model.Artifact{Source: base + "/ok.zip", Destination: "local/tools"}, dir); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "local/tools/bin/tool")); got != "t" {
		t.Errorf("zip entry %q", got)
	}
}

func TestAFileSourceAndAMissingOneAndArchiveFalse(t *testing.T) {
	src := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(src, tarGz(t, entry{name: "f", body: "from file"}), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := artifact.Fetcher{}
	if _, err := f.Fetch(context.Background(), model.Artifact{Source: "file://" + src}, dir); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "local/f")); got != "from file" {
		t.Errorf("unpacked from a file source: %q", got)
	}
	if _, err := f.Fetch(context.Background(), model.Artifact{Source: "file://" + src, Destination: "kept", Options: map[string]string{"archive": "false"}}, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kept/bundle.tar.gz")); err != nil {
		t.Errorf("archive = false did not keep the archive: %v", err)
	}
	base, _ := serve(t, nil)
	if _, err := f.Fetch(context.Background(), model.Artifact{Source: base + "/missing.tgz"}, dir); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a missing source: %v", err)
	}
}

// Package artifact downloads a task's artifacts into its directory
// (Nomad's artifact block): over http or https, or from a file:// path on
// the node, checked against a checksum when one is given, and unpacked
// when the source is an archive (tar, tar.gz, tgz, tar.bz2, tbz2, zip).
//
// It owns only the fetch and the unpacking: when to fetch (once per
// allocation, before the templates) is the allocation runner's decision.
// It never writes outside the destination it is given: an archive entry
// that would land elsewhere (an absolute name, "..", a link pointing out)
// fails the fetch. TestAnArchiveEntryLeavingTheDestinationFailsTheFetch
// enforces that.
//
// The artifact block it serves is specified in docs/job-files.md
// ("Artifacts").
package artifact

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hivelet/hivelet/host/model"
)

// Fetcher downloads artifacts. The zero value uses http.DefaultClient.
type Fetcher struct {
	// Client makes the http(s) requests; each request is also bound by
	// the context given to Fetch.
	Client *http.Client
}

// Fetch downloads a into taskDir (a's destination is relative to it) and
// returns the paths written, relative to taskDir.
func (f Fetcher) Fetch(ctx context.Context, a model.Artifact, taskDir string) ([]string, error) {
	u, err := url.Parse(a.Source)
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", a.Source, err)
	}
	dest, err := within(taskDir, a.Dest())
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", a.Source, err)
	}
	format := archiveFormat(a, u.Path)
	if a.Mode == model.ArtifactDir && format == "" {
		return nil, fmt.Errorf("artifact %s: mode \"dir\" needs an archive (%s), and the name does not say it is one (set options { archive = \"tar.gz\" })", a.Source, strings.Join(model.ArchiveFormats, ", "))
	}
	tmp, err := os.CreateTemp(taskDir, ".artifact-*")
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", a.Source, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := f.download(ctx, a, u, tmp); err != nil {
		return nil, fmt.Errorf("artifact %s: %w", a.Source, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("artifact %s: %w", a.Source, err)
	}
	var written []string
	switch {
	case format != "":
		written, err = unpack(tmp, format, dest)
	case a.Mode == model.ArtifactFile:
		err = saveAs(tmp, dest)
		written = []string{dest}
	default:
		name := path.Base(u.Path)
		if name == "/" || name == "." || name == "" {
			return nil, fmt.Errorf("artifact %s: the source names no file to save (use mode = \"file\" and a destination)", a.Source)
		}
		target := filepath.Join(dest, name)
		err = saveAs(tmp, target)
		written = []string{target}
	}
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", a.Source, err)
	}
	for i, w := range written {
		if rel, err := filepath.Rel(taskDir, w); err == nil {
			written[i] = rel
		}
	}
	return written, nil
}

// download copies the source into w, checking the checksum if asked.
func (f Fetcher) download(ctx context.Context, a model.Artifact, u *url.URL, w io.Writer) error {
	var sum hash.Hash
	typ, want := a.Checksum()
	switch typ {
	case "":
	case "md5":
		sum = md5.New()
	case "sha1":
		sum = sha1.New()
	case "sha256":
		sum = sha256.New()
	case "sha512":
		sum = sha512.New()
	default:
		return fmt.Errorf("checksum type %q is not one of md5, sha1, sha256, sha512", typ)
	}
	if sum != nil {
		w = io.MultiWriter(w, sum)
	}
	var body io.ReadCloser
	switch u.Scheme {
	case "http", "https":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		for k, v := range a.Headers {
			req.Header.Set(k, v)
		}
		client := f.Client
		if client == nil {
			client = http.DefaultClient
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("downloading: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("downloading: the server answered %s", resp.Status)
		}
		body = resp.Body
	case "file":
		fh, err := os.Open(u.Path)
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		body = fh
	default:
		return fmt.Errorf("scheme %q: only http, https and file are fetched", u.Scheme)
	}
	defer body.Close()
	if _, err := io.Copy(w, readerCtx{ctx, body}); err != nil {
		return fmt.Errorf("downloading: %w", err)
	}
	if sum != nil {
		if got := hex.EncodeToString(sum.Sum(nil)); got != want {
			return fmt.Errorf("checksum mismatch: %s is %s, the job wants %s", typ, got, want)
		}
	}
	return nil
}

// readerCtx stops a copy from a file when the context ends (an http body
// stops by itself).
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// archiveFormat is the archive format to unpack the source as: the archive
// option when set ("false": none), else what the name ends with, unless
// the mode is file.
func archiveFormat(a model.Artifact, name string) string {
	if opt, ok := a.Options["archive"]; ok {
		if opt == "false" {
			return ""
		}
		return opt
	}
	if a.Mode == model.ArtifactFile {
		return ""
	}
	lower := strings.ToLower(name)
	for _, f := range []string{"tar.gz", "tgz", "tar.bz2", "tbz2", "tar", "zip"} {
		if strings.HasSuffix(lower, "."+f) {
			return f
		}
	}
	return ""
}

// within joins rel to root and refuses a result outside root.
func within(root, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%q is absolute; it must stay inside %s", rel, root)
	}
	p := filepath.Join(root, rel)
	if r, err := filepath.Rel(root, p); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%q leaves %s", rel, root)
	}
	return p, nil
}

// saveAs writes r to target through a temporary file renamed into place.
func saveAs(r io.Reader, target string) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".artifact-part-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), target)
}

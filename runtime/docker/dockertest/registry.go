package dockertest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
)

// Registry is a minimal read-only image registry (the HTTP API v2 subset a
// pull uses) on loopback, so that tests can exercise real pulls without any
// network: the engine takes 127.0.0.0/8 registries as insecure and speaks
// plain HTTP to them. Images are named Host()+"/"+name+":"+tag.
type Registry struct {
	srv *httptest.Server

	mu        sync.Mutex
	manifests map[string][]byte // "name:tag" and "name@digest"
	blobs     map[string][]byte // digest
	user      string
	pass      string
	requests  int
}

// NewRegistry starts an empty registry. With a user, every request must
// carry those basic-auth credentials.
func NewRegistry(user, pass string) *Registry {
	r := &Registry{manifests: map[string][]byte{}, blobs: map[string][]byte{}, user: user, pass: pass}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// Host is the registry's address, the first part of its image names.
func (r *Registry) Host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// Close stops the registry.
func (r *Registry) Close() { r.srv.Close() }

// Requests counts the requests served (a pull that did not happen served none).
func (r *Registry) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// AddImage serves binary as image name:tag (one gzipped layer, entrypoint
// /app) and returns its full reference.
func (r *Registry) AddImage(name, tag string, binary []byte) (string, error) {
	layerTar, config, err := imageParts(binary)
	if err != nil {
		return "", err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(layerTar); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	digest := func(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config":        map[string]any{"mediaType": "application/vnd.docker.container.image.v1+json", "size": len(config), "digest": digest(config)},
		"layers":        []map[string]any{{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": gz.Len(), "digest": digest(gz.Bytes())}},
	})
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blobs[digest(config)] = config
	r.blobs[digest(gz.Bytes())] = gz.Bytes()
	r.manifests[name+":"+tag] = manifest
	r.manifests[name+"@"+digest(manifest)] = manifest
	return r.Host() + "/" + name + ":" + tag, nil
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests++
	r.mu.Unlock()
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if r.user != "" {
		if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="dockertest"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	path := strings.TrimPrefix(req.URL.Path, "/v2/")
	if path == "" {
		w.WriteHeader(http.StatusOK)
		return
	}
	var body []byte
	var ctype string
	r.mu.Lock()
	if i := strings.LastIndex(path, "/manifests/"); i > 0 {
		name, ref := path[:i], path[i+len("/manifests/"):]
		sep := ":"
		if strings.HasPrefix(ref, "sha256:") {
			sep = "@"
		}
		body, ctype = r.manifests[name+sep+ref], "application/vnd.docker.distribution.manifest.v2+json"
	} else if i := strings.LastIndex(path, "/blobs/"); i > 0 {
		body, ctype = r.blobs[path[i+len("/blobs/"):]], "application/octet-stream"
	}
	r.mu.Unlock()
	if body == nil {
		http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}`, http.StatusNotFound)
		return
	}
	sum := sha256.Sum256(body)
	w.Header().Set("Docker-Content-Digest", "sha256:"+hex.EncodeToString(sum[:]))
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if req.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

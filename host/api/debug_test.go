package api

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestTheProfilesNeedTheTokenFromLoopbackToo: with http.enable_debug the
// profiles are served, but only with the token, even to a loopback peer
// whose reads of /v1/ need none; the heap profile is one pprof parses, a
// CPU profile runs for the seconds asked; the API beside them is served as
// before. With no token configured (insecure_no_auth) they are served
// without one.
func TestTheProfilesNeedTheTokenFromLoopbackToo(t *testing.T) {
	const token = "s3cret-token"
	api := RequireToken(NewHandler(Providers{Node: oneNode{}}, nil), token)
	get := func(t *testing.T, token, path, peer, auth string) (int, []byte) {
		t.Helper()
		inner := api
		if token == "" { // insecure_no_auth: the API is not wrapped either
			inner = NewHandler(Providers{Node: oneNode{}}, nil)
		}
		h := WithDebug(inner, token)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = peer
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, b
	}
	const local, remote = "127.0.0.1:50000", "192.0.2.7:50000"
	for _, c := range []struct {
		what, path, peer, auth string
		want                   int
	}{
		{"the heap from loopback without a token", "/debug/pprof/heap", local, "", 401},
		{"the index from loopback without a token", "/debug/pprof/", local, "", 401},
		{"a CPU profile with a wrong token", "/debug/pprof/profile?seconds=1", local, "Bearer nope", 401},
		{"goroutines from elsewhere without a token", "/debug/pprof/goroutine?debug=1", remote, "", 401},
		{"another /debug/ path without a token", "/debug/vars", local, "", 401},
		{"the index with the token", "/debug/pprof/", local, "Bearer " + token, 200},
		{"goroutines with the token from elsewhere", "/debug/pprof/goroutine?debug=1", remote, "Bearer " + token, 200},
		{"a /debug/ path that is not a profile", "/debug/vars", local, "Bearer " + token, 404},
		{"the API beside them, from loopback", "/v1/node", local, "", 200},
		{"the API beside them, from elsewhere without a token", "/v1/node", remote, "", 401},
	} {
		code, body := get(t, token, c.path, c.peer, c.auth)
		if code != c.want {
			t.Errorf("%s: %d %.200s, want %d", c.what, code, body, c.want)
		}
		if code == 401 && !strings.Contains(string(body), TokenFile) {
			t.Errorf("%s: the refusal does not say where the token is: %s", c.what, body)
		}
	}
	code, body := get(t, token, "/debug/pprof/heap?gc=1", local, "Bearer "+token)
	if code != 200 {
		t.Fatalf("heap with the token: %d %.200s", code, body)
	}
	if got := unzip(t, body); !bytes.Contains(got, []byte("inuse_space")) {
		t.Fatalf("the heap profile names no inuse_space sample (%d bytes)", len(got))
	}
	start := time.Now()
	code, body = get(t, token, "/debug/pprof/profile?seconds=1", local, "Bearer "+token)
	if code != 200 {
		t.Fatalf("CPU profile with the token: %d %.200s", code, body)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("a 1 s CPU profile came back in %s", took)
	}
	if got := unzip(t, body); !bytes.Contains(got, []byte("cpu")) {
		t.Fatalf("the CPU profile names no cpu sample (%d bytes)", len(got))
	}
	// No token configured: served without one.
	if code, body := get(t, "", "/debug/pprof/goroutine?debug=1", local, ""); code != 200 || !strings.Contains(string(body), "goroutine profile:") {
		t.Fatalf("without a configured token: %d %.200s", code, body)
	}
}

// unzip reads a pprof profile's gzip wrapper: the protobuf inside holds its
// sample types' names in its string table.
func unzip(t *testing.T, b []byte) []byte {
	t.Helper()
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a gzipped profile: %v (%.100q)", err, b)
	}
	out, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

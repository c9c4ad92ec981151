package api

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/sdk/driver"
)

type oneNode struct{}

func (oneNode) Node() *model.Node { return &model.Node{ID: "n1"} }

// TestWritesNeedTheTokenAndRemoteReadsToo: through the real routes, a job
// write without the token (none, wrong, not a bearer) is 401 and writes
// nothing, from loopback as from elsewhere; with it the job is written. A
// read from loopback needs nothing; from another peer it needs the token.
func TestWritesNeedTheTokenAndRemoteReadsToo(t *testing.T) {
	mw := &memWriter{jobs: map[string]*model.Job{}}
	schemas := map[string]*driver.Schema{"mock": {Fields: map[string]*driver.Field{"image": {Type: driver.TypeString}}}}
	const token = "s3cret-token"
	h := RequireToken(NewHandler(Providers{Node: oneNode{}, JobWrites: &JobWrites{Writer: mw, Drivers: schemas}}, nil), token)
	do := func(method, path, peer, auth string) (int, string) {
		rec := httptest.NewRecorder()
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(apiJobHCL)
		}
		req := httptest.NewRequest(method, path, body)
		req.RemoteAddr = peer
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	const local, remote, local6 = "127.0.0.1:50000", "192.0.2.7:50000", "[::1]:50000"
	for _, c := range []struct {
		what, method, path, peer, auth string
		want                           int
	}{
		{"a write without a token", "POST", "/v1/jobs", local, "", 401},
		{"a write with a wrong token", "POST", "/v1/jobs", local, "Bearer nope", 401},
		{"a write with the token not as a bearer", "POST", "/v1/jobs", local, token, 401},
		{"a stop without a token", "POST", "/v1/job/web/stop", local6, "", 401},
		{"a remote write without a token", "POST", "/v1/jobs", remote, "", 401},
		{"a remote read without a token", "GET", "/v1/node", remote, "", 401},
		{"a loopback read", "GET", "/v1/node", local, "", 200},
		{"an IPv6 loopback read", "GET", "/v1/node", local6, "", 200},
		{"a remote read with the token", "GET", "/v1/node", remote, "Bearer " + token, 200},
	} {
		code, body := do(c.method, c.path, c.peer, c.auth)
		if code != c.want {
			t.Errorf("%s: %d %s, want %d", c.what, code, body, c.want)
		}
		if code == 401 && !strings.Contains(body, TokenFile) {
			t.Errorf("%s: the refusal does not say where the token is: %s", c.what, body)
		}
	}
	if len(mw.jobs) != 0 {
		t.Fatalf("refused writes wrote %d jobs", len(mw.jobs))
	}
	// Control: with the token the write is served, from anywhere.
	for _, peer := range []string{local, remote} {
		if code, body := do("POST", "/v1/jobs", peer, "Bearer "+token); code != 200 {
			t.Fatalf("a write with the token from %s: %d %s", peer, code, body)
		}
	}
	if mw.jobs["web"] == nil {
		t.Fatal("the authorised write wrote nothing")
	}
}

func TestANonLoopbackListenerWithoutATokenIsRefused(t *testing.T) {
	for _, c := range []struct {
		cfg     Config
		refused string
	}{
		{Config{Addr: "0.0.0.0:0"}, "not loopback"},
		{Config{Addr: "0.0.0.0:0", AllowNonLoopback: true}, "no token"},
		{Config{Addr: "127.0.0.1:0"}, ""},
		{Config{Addr: "0.0.0.0:0", AllowNonLoopback: true, Token: "t"}, ""},
	} {
		l, err := Listen(c.cfg)
		if c.refused == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.cfg, err)
			} else {
				l.Close()
			}
			continue
		}
		if err == nil {
			l.Close()
			t.Errorf("%+v listened", c.cfg)
		} else if !strings.Contains(err.Error(), c.refused) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.refused)
		}
	}
}

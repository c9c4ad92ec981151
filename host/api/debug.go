package api

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// WithDebug serves Go's runtime profiles (net/http/pprof) under
// /debug/pprof/ beside h, for http.enable_debug. Profiles are not reads
// like the others: a CPU profile or trace costs the agent CPU for as long
// as it is asked to run, and a goroutine dump shows what every goroutine
// is doing. So every /debug/ request needs the API token, from loopback
// too, unless the agent serves without one (token ""). Everything else is
// h's, unchanged.
func WithDebug(h http.Handler, token string) http.Handler {
	mux := debugMux()
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug" && !strings.HasPrefix(r.URL.Path, "/debug/") {
			h.ServeHTTP(w, r)
			return
		}
		if token != "" && !hasBearer(r, want) {
			refuseToken(w, "the profiles need the agent's API token, from loopback too")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// debugMux routes the profiles (docs/api.md, "Debugging").
func debugMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index) // the named profiles: heap, goroutine, allocs, block, mutex, threadcreate
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

package api

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// The API is a node's control surface: a POST runs or stops jobs and acts
// on rollouts for the whole fleet, so every write carries the agent's
// bearer token (Authorization: Bearer <token>; generated at first start in
// <state_dir>/http.token, or configured). Reads from a loopback peer stay
// open, as they show what `hivelet` CLI users on the node may read anyway;
// a read from any other peer needs the token too. A listener beyond
// loopback without a token is refused by Listen. Tested by
// TestWritesNeedTheTokenAndRemoteReadsToo and
// TestANonLoopbackListenerWithoutATokenIsRefused.

// RequireToken wraps h with the API's authentication: token "" serves
// everything unauthenticated (only on loopback: Listen refuses otherwise).
func RequireToken(h http.Handler, token string) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		if read && loopbackPeer(r.RemoteAddr) {
			h.ServeHTTP(w, r)
			return
		}
		if !hasBearer(r, want) {
			what := "writes need"
			if read {
				what = "reads from beyond loopback need"
			}
			refuseToken(w, what+" the agent's API token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hasBearer reports whether r carries want ("Bearer <token>"), compared in
// constant time.
func hasBearer(r *http.Request, want []byte) bool {
	got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// refuseToken answers 401: who needs the token, and where the token is.
func refuseToken(w http.ResponseWriter, who string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="hivelet"`)
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": who + ": Authorization: Bearer <the token in <state_dir>/" + TokenFile + ">"})
}

// TokenFile is the API token's file name in the agent's state directory.
const TokenFile = "http.token"

func loopbackPeer(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

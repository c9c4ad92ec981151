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
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hivelet"`)
			what := "writes need"
			if read {
				what = "reads from beyond loopback need"
			}
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": what + " the agent's API token: Authorization: Bearer <the token in <state_dir>/" + TokenFile + ">"})
			return
		}
		h.ServeHTTP(w, r)
	})
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

package main

import (
	"fmt"
	"log/slog"

	"github.com/hivelet/hivelet/host/config"
	"github.com/hivelet/hivelet/host/fleet"
)

// loadAPIToken returns the bearer token the HTTP API's writes need
// (api.RequireToken): the one in http.token_file, created at first start
// (256 bits, mode 0600, <state_dir>/http.token by default), or "" with
// http.insecure_no_auth, which is warned at every start and which config
// refuses beyond loopback.
func loadAPIToken(rc *config.Resolved, log *slog.Logger) (string, error) {
	if rc.HTTPNoAuth {
		log.Warn("the HTTP API serves writes without a token (http.insecure_no_auth): anyone on this machine can run and stop jobs on the fleet through it", "addr", rc.HTTPAddr)
		return "", nil
	}
	token, err := fleet.LoadOrCreateSecret(rc.HTTPTokenFile)
	if err != nil {
		return "", fmt.Errorf("the HTTP API token: %w", err)
	}
	log.Info("HTTP API writes need the bearer token", "token_file", rc.HTTPTokenFile)
	return token, nil
}

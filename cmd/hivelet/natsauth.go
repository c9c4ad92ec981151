package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/hivelet/hivelet/host/fleet"
)

// natsToken is the token the CLI presents to the NATS at urls: the
// HIVELET_NATS_TOKEN variable, else the file named by --nats-token-file,
// else the one an agent published for this user (fleet.FindToken). from
// says where it came from ("" when none was found).
func natsToken(urls, tokenFile string) (token, from string, err error) {
	if t := os.Getenv("HIVELET_NATS_TOKEN"); t != "" {
		return t, "HIVELET_NATS_TOKEN", nil
	}
	return fleet.FindToken(urls, tokenFile)
}

// natsNKeySeedFile is the NKey seed file the CLI authenticates with on a
// fleet whose servers give each user its own permissions
// (examples/fleet/permissions.conf): HIVELET_NATS_NKEY_SEED_FILE.
func natsNKeySeedFile() string { return os.Getenv("HIVELET_NATS_NKEY_SEED_FILE") }

// natsConnectError explains a failed connection; a refusal for want of
// credentials says what was tried and how to get through.
func natsConnectError(url, from string, err error) error {
	if errors.Is(err, nats.ErrAuthorization) {
		if from == "" {
			return fmt.Errorf("connecting to NATS at %s: the server requires credentials and none were found for this user: "+
				"run as the agent's user, or pass --nats-token-file <state_dir>/%s: %w", url, fleet.TokenFile, err)
		}
		return fmt.Errorf("connecting to NATS at %s: the credentials from %s were refused (a stale copy? the agent's are in <state_dir>/%s): %w", url, from, fleet.TokenFile, err)
	}
	return fmt.Errorf("connecting to NATS at %s (is `hivelet agent` running?): %w", url, err)
}

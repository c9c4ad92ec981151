package node

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hivelet/hivelet/host/wanted"
)

// IDFile is the name of the file holding the node ID in the state directory.
const IDFile = "node-id"

// NewID returns a random UUID (version 4).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// LoadOrCreateID returns the node ID kept in stateDir, creating and
// persisting a random one if there is none. In dev mode it returns a fresh ID
// and writes nothing.
func LoadOrCreateID(stateDir string, dev bool) (string, error) {
	return LoadOrCreateIDAs(stateDir, "", dev)
}

// LoadOrCreateIDAs is LoadOrCreateID with a node ID the configuration
// names (node_id; "" for none): a fleet whose NATS permissions name each
// node's keys (examples/fleet/permissions.conf) must know its node IDs in
// advance. The configured ID is persisted like a generated one; a node ID
// file that says another ID is an error, since the node's allocations and
// its record in NATS are under the ID it ran with.
func LoadOrCreateIDAs(stateDir, configured string, dev bool) (string, error) {
	if configured != "" && !wanted.ValidToken(configured) {
		return "", fmt.Errorf("node_id %q is not a valid node ID (allowed: letters, digits, '-', '_', '=', '/')", configured)
	}
	if dev {
		if configured != "" {
			return configured, nil
		}
		return NewID(), nil
	}
	p := filepath.Join(stateDir, IDFile)
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if !wanted.ValidToken(id) {
			return "", fmt.Errorf("reading node ID from %s: %q is not a valid node ID", p, id)
		}
		if configured != "" && id != configured {
			return "", fmt.Errorf("the configuration's node_id is %q but this state directory's node ran as %q (%s): its allocations and node record are under that ID; keep it, or use a new state directory", configured, id, p)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("reading node ID: %w", err)
	}
	id := configured
	if id == "" {
		id = NewID()
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("persisting node ID: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("persisting node ID: %w", err)
	}
	return id, nil
}

package manager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ReattachStore keeps each plugin's reattach data between host runs. The
// agent backs it with its bbolt state store (host/state.Store has exactly
// these methods); MemoryStore and FileStore serve tests and tools. The data
// is opaque to the store.
type ReattachStore interface {
	PutPluginReattach(name string, data []byte) error
	// PluginReattach returns ok == false when nothing is stored for name.
	PluginReattach(name string) (data []byte, ok bool, err error)
	DeletePluginReattach(name string) error
}

// MemoryStore is a ReattachStore in memory; a host restart is simulated by
// handing the same MemoryStore to a second Manager.
type MemoryStore struct {
	mu   sync.Mutex
	data map[string][]byte
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{data: map[string][]byte{}} }

// PutPluginReattach stores a copy of data.
func (s *MemoryStore) PutPluginReattach(name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[name] = append([]byte(nil), data...)
	return nil
}

// PluginReattach returns a copy of what is stored.
func (s *MemoryStore) PluginReattach(name string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.data[name]
	return append([]byte(nil), d...), ok, nil
}

// DeletePluginReattach forgets name's data.
func (s *MemoryStore) DeletePluginReattach(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.data, name)
	return nil
}

// FileStore is a ReattachStore keeping one file per plugin in a directory
// (created 0700: reattach data names the plugin's socket).
type FileStore struct {
	dir string
}

// NewFileStore returns a FileStore in dir, creating it.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating reattach store %s: %w", dir, err)
	}
	return &FileStore{dir: dir}, nil
}

func (s *FileStore) path(name string) string { return filepath.Join(s.dir, name+".reattach.json") }

// PutPluginReattach writes name's file atomically (write, then rename).
func (s *FileStore) PutPluginReattach(name string, data []byte) error {
	tmp := s.path(name) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("storing reattach data of plugin %s: %w", name, err)
	}
	if err := os.Rename(tmp, s.path(name)); err != nil {
		return fmt.Errorf("storing reattach data of plugin %s: %w", name, err)
	}
	return nil
}

// PluginReattach reads name's file.
func (s *FileStore) PluginReattach(name string) ([]byte, bool, error) {
	b, err := os.ReadFile(s.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading reattach data of plugin %s: %w", name, err)
	}
	return b, true, nil
}

// DeletePluginReattach removes name's file.
func (s *FileStore) DeletePluginReattach(name string) error {
	if err := os.Remove(s.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("deleting reattach data of plugin %s: %w", name, err)
	}
	return nil
}

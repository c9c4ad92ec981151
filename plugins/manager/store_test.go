package manager_test

import (
	"bytes"
	"testing"

	"github.com/hivelet/hivelet/host/state"
	"github.com/hivelet/hivelet/plugins/manager"
)

// The agent backs reattach data with its bbolt state store.
var _ manager.ReattachStore = (*state.Store)(nil)

func TestReattachStoresKeepDataPerPlugin(t *testing.T) {
	fs, err := manager.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]manager.ReattachStore{"memory": manager.NewMemoryStore(), "file": fs} {
		t.Run(name, func(t *testing.T) {
			if _, ok, err := s.PluginReattach("mock"); ok || err != nil {
				t.Fatalf("empty store: ok=%v err=%v", ok, err)
			}
			if err := s.PutPluginReattach("mock", []byte("a")); err != nil {
				t.Fatal(err)
			}
			if err := s.PutPluginReattach("exec", []byte("b")); err != nil {
				t.Fatal(err)
			}
			if d, ok, err := s.PluginReattach("mock"); !ok || err != nil || !bytes.Equal(d, []byte("a")) {
				t.Fatalf("mock: %q %v %v", d, ok, err)
			}
			if err := s.DeletePluginReattach("mock"); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := s.PluginReattach("mock"); ok {
				t.Fatal("deleted data still there")
			}
			if d, ok, _ := s.PluginReattach("exec"); !ok || string(d) != "b" {
				t.Fatal("deleting one plugin's data lost another's")
			}
		})
	}
}

package allocrunner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mkdirs makes missing parents, accepts directories that exist, and
// refuses a path that is a file or lies under one, as os.MkdirAll does.
func TestMkdirsMakesParentsAndRefusesFiles(t *testing.T) {
	root := t.TempDir()
	task := filepath.Join(root, "alloc-1", "web")
	logs := filepath.Join(root, "alloc-1", "alloc", "logs")
	if err := mkdirs(task, filepath.Join(task, "local"), filepath.Join(task, "secrets"), logs); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{task, filepath.Join(task, "local"), filepath.Join(task, "secrets"), logs} {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755&^umask() {
			t.Fatalf("%s: %v %v", p, fi, err)
		}
	}
	// Again: every one exists.
	if err := mkdirs(task, logs); err != nil {
		t.Fatalf("making existing directories: %v", err)
	}
	file := filepath.Join(root, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := mkdirs(file); err == nil || !strings.Contains(err.Error(), "a-file") {
		t.Fatalf("a file as a directory: %v", err)
	}
	if err := mkdirs(filepath.Join(file, "sub", "dir")); err == nil || !strings.Contains(err.Error(), "a-file") {
		t.Fatalf("a directory under a file: %v", err)
	}
}

func umask() os.FileMode {
	dir, err := os.MkdirTemp("", "umask-")
	if err != nil {
		return 0
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "d")
	if os.Mkdir(p, 0o777) != nil {
		return 0
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return 0o777 &^ fi.Mode().Perm()
}

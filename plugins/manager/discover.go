package manager

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ExternalPrefix starts the file name of every external driver plugin in the
// plugin directory: hivelet-driver-NAME serves the driver NAME.
const ExternalPrefix = "hivelet-driver-"

// Plugin is a driver plugin the manager can launch.
type Plugin struct {
	// Name is the driver's name in job files.
	Name string
	// Path is the executable; for a built-in, the hivelet binary itself.
	Path string
	// Args are passed to Path: ["plugin", "serve", NAME] for a built-in.
	Args []string
	// Builtin is true for a driver served by the hivelet binary.
	Builtin bool
	// Shadows is true for an external file named like a built-in driver.
	// The manager runs it in the built-in's place only when its SHA-256 is
	// pinned in the configuration; otherwise it is refused and the
	// built-in kept (TestAFileNamedLikeABuiltinIsRefusedUnlessPinned).
	Shadows bool
}

// builtinPlugin is the built-in driver name served by selfExe.
func builtinPlugin(selfExe, name string) Plugin {
	return Plugin{Name: name, Path: selfExe, Args: []string{"plugin", "serve", name}, Builtin: true}
}

// Discover lists the built-in drivers (served by selfExe) and the
// hivelet-driver-* executables in pluginDir, sorted by name. An external
// plugin with a built-in's name is listed in its place, marked Shadows:
// the manager lets it replace the built-in (how an operator ships a newer
// driver without a new agent) only when it is pinned. pluginDir may be
// empty.
func Discover(selfExe string, builtins []string, pluginDir string) ([]Plugin, error) {
	byName := map[string]Plugin{}
	for _, n := range builtins {
		byName[n] = builtinPlugin(selfExe, n)
	}
	if pluginDir != "" {
		ents, err := os.ReadDir(pluginDir)
		if err != nil {
			return nil, fmt.Errorf("discovering plugins in %s: %w", pluginDir, err)
		}
		for _, e := range ents {
			name, ok := strings.CutPrefix(e.Name(), ExternalPrefix)
			if !ok || name == "" {
				continue
			}
			path := filepath.Join(pluginDir, e.Name())
			fi, err := os.Stat(path)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
				continue
			}
			_, shadows := byName[name]
			byName[name] = Plugin{Name: name, Path: path, Shadows: shadows && byName[name].Builtin}
		}
	}
	out := make([]Plugin, 0, len(byName))
	for _, p := range byName {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// FileSHA256 returns the hex SHA-256 of a file's content.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	defer f.Close()
	return readerSHA256(path, f)
}

func readerSHA256(what string, r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", fmt.Errorf("hashing %s: %w", what, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

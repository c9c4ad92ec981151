package policies

import (
	"embed"
	"slices"
	"strings"
)

//go:generate go run ./builtin/gen

//go:embed builtin/*.wasm builtin/GOVERSION
var builtinFS embed.FS

// builtinKinds maps each built-in policy to its kind.
var builtinKinds = map[string]Kind{
	"percent":    KindCanary,
	"spread":     KindCanary,
	"rendezvous": KindCanary,
	"labelled":   KindCanary,
	"default":    KindCompletion,
	"quorum":     KindCompletion,
}

// BuiltinPrefix addresses a built-in policy by name, e.g. "builtin:spread".
const BuiltinPrefix = "builtin:"

// BuiltinNames lists the built-in policies, sorted.
func BuiltinNames() []string {
	names := make([]string, 0, len(builtinKinds))
	for n := range builtinKinds {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// BuiltinWasm returns the embedded module of a built-in policy, by name
// with or without the "builtin:" prefix.
func BuiltinWasm(name string) ([]byte, bool) {
	name = strings.TrimPrefix(name, BuiltinPrefix)
	if _, ok := builtinKinds[name]; !ok {
		return nil, false
	}
	b, err := builtinFS.ReadFile("builtin/" + name + ".wasm")
	return b, err == nil
}

// BuiltinGoVersion is the toolchain the embedded modules were built with.
func BuiltinGoVersion() string {
	b, _ := builtinFS.ReadFile("builtin/GOVERSION")
	return strings.TrimSpace(string(b))
}

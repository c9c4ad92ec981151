// Package render owns task templates (a job's template blocks): which
// functions a template may call, checking a template when the job file is
// read, and rendering it on the node from the task's environment.
//
// Invariants:
//   - A template that calls a function hivelet does not have is refused when
//     the file is read, naming the function and its line
//     (TestAnUnknownFunctionIsRefusedWithItsLine); the node never meets it.
//   - Rendering reads nothing but the sources it is given (the task's
//     environment: NOMAD_* variables, node attributes and meta, the
//     allocation's ports, the task's env; and the variables store through
//     its lookup): no file, network or clock of its own. The same inputs
//     render the same bytes (TestRenderingIsAFunctionOfTheTaskEnvironment).
//
// The template block and its functions are specified in docs/job-files.md
// ("Templates").
package render

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode"
	"unicode/utf8"

	"github.com/hivelet/hivelet/host/model"
)

// Lookup resolves an environment name (NOMAD_PORT_http, node.unique.name,
// attr.kernel.name, meta.rack, a task env variable).
type Lookup func(name string) (string, bool)

// VarLookup reads a variable of the variables store (host/vars): its items,
// and whether it exists.
type VarLookup func(path string) (map[string]string, bool, error)

// ServiceLookup reads the registered instances of a service (host/services).
type ServiceLookup func(name string) ([]*model.ServiceRegistration, error)

// Sources are what a template reads: the task's environment, the variables
// store (nil: no store, nomadVar fails) and the services bucket (nil: none,
// nomadService fails).
type Sources struct {
	Env     Lookup
	Var     VarLookup
	Service ServiceLookup
}

// unavailable are the template functions of Nomad's templates (consul-
// template's) that need a source hivelet does not have, with the reason.
var unavailable = map[string]string{
	"ls": "hivelet has no Consul KV", "safeLs": "hivelet has no Consul KV", "tree": "hivelet has no Consul KV", "safeTree": "hivelet has no Consul KV",
	"services": "hivelet's templates read a service by name (service, nomadService), not the list of services", "connect": "hivelet has no Consul catalog",
	"node": "hivelet has no Consul catalog", "nodes": "hivelet has no Consul catalog", "caRoots": "hivelet has no Consul Connect", "caLeaf": "hivelet has no Consul Connect",
	"secret": "hivelet has no Vault integration", "secrets": "hivelet has no Vault integration", "pkiCert": "hivelet has no Vault integration",
	"nomadVarList": "hivelet's templates read variables by path (nomadVar), not lists of them", "nomadVarListSafe": "hivelet's templates read variables by path (nomadVar), not lists of them",
	"nomadServices": "hivelet's templates read a service by name (nomadService), not the list of services",
	"file":          "templates read only the task's environment, not files on the node",
	"plugin":        "templates run no programs",
	"sockaddr":      "templates read only the task's environment; use {{ env \"NOMAD_IP_<label>\" }}",
	"timestamp":     "a rendered file must not depend on when it was rendered",
}

// Names lists the functions a template may call, besides text/template's
// own (and, or, not, len, index, printf, eq, ...).
func Names() []string {
	fm := funcs(Sources{})
	out := make([]string, 0, len(fm))
	for k := range fm {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func funcs(src Sources) template.FuncMap {
	lookup := src.Env
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	readVar := func(path string) (map[string]string, bool, error) {
		if src.Var == nil {
			return nil, false, fmt.Errorf("variable %s: this node has no variables store", path)
		}
		return src.Var(path)
	}
	return template.FuncMap{
		// nomadVar is a variable's items (a missing one is an error: the
		// file would render wrong); nomadVarExists says whether it exists.
		"nomadVar": func(path string) (map[string]string, error) {
			items, ok, err := readVar(path)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("variable %s does not exist (hivelet var put %s key=value)", path, path)
			}
			return items, nil
		},
		"nomadVarExists": func(path string) (bool, error) {
			_, ok, err := readVar(path)
			return ok, err
		},
		// key, keyOrDefault and keyExists are consul-template's reads of
		// Consul KV: hivelet answers them from its variables store, the
		// key's last segment naming an item of the variable at the rest
		// of the path (key "homelab/traefik/traefik.yaml" is item
		// traefik.yaml of variable homelab/traefik), so a file written
		// for Consul KV runs once the values are put there.
		"key": func(k string) (string, error) {
			v, ok, err := readKey(readVar, k)
			if err != nil {
				return "", err
			}
			if !ok {
				path, item, _ := kvItem(k)
				return "", fmt.Errorf("key %s: variable %s has no item %s (hivelet var put %s %s=...)", k, path, item, path, item)
			}
			return v, nil
		},
		"keyOrDefault": func(k, def string) (string, error) {
			v, ok, err := readKey(readVar, k)
			if err != nil || !ok {
				return def, err
			}
			return v, nil
		},
		"keyExists": func(k string) (bool, error) {
			_, ok, err := readKey(readVar, k)
			return ok, err
		},
		// nomadService is the registered instances of a service (each
		// with .Address, .Port, .Tags, .NodeID, .AllocID), sorted by node.
		"nomadService": func(name string) ([]*model.ServiceRegistration, error) {
			if src.Service == nil {
				return nil, fmt.Errorf("service %s: this node has no services bucket", name)
			}
			return src.Service(name)
		},
		// service is consul-template's: hivelet answers it from its own
		// catalog (where a provider "consul" service is registered too),
		// with nomadService's instances. Its query is
		// [tag.]name[@datacenter][|filter]: a tag keeps the instances that
		// carry it; the datacenter is not looked at (a fleet is one
		// region), nor the health filter (the catalog holds the instances
		// whose checks pass).
		"service": func(query string, _ ...string) ([]*model.ServiceRegistration, error) {
			if src.Service == nil {
				return nil, fmt.Errorf("service %s: this node has no services bucket", query)
			}
			tag, name := consulQuery(query)
			all, err := src.Service(name)
			if err != nil || tag == "" {
				return all, err
			}
			var out []*model.ServiceRegistration
			for _, r := range all {
				if slices.Contains(r.Tags, tag) {
					out = append(out, r)
				}
			}
			return out, nil
		},
		"env": func(name string) string { v, _ := lookup(name); return v },
		"envOrDefault": func(name, def string) string {
			if v, ok := lookup(name); ok && v != "" {
				return v
			}
			return def
		},
		"toUpper": strings.ToUpper,
		"toLower": strings.ToLower,
		"toTitle": func(s string) string {
			r, n := utf8.DecodeRuneInString(s)
			if n == 0 {
				return s
			}
			return string(unicode.ToUpper(r)) + s[n:]
		},
		"trimSpace":    strings.TrimSpace,
		"trim":         func(cut, s string) string { return strings.Trim(s, cut) },
		"trimPrefix":   func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
		"trimSuffix":   func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"replaceAll":   func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"split":        func(sep, s string) []string { return strings.Split(s, sep) },
		"join":         func(sep string, parts []string) string { return strings.Join(parts, sep) },
		"contains":     func(sub, s string) bool { return strings.Contains(s, sub) },
		"containsAny":  func(chars, s string) bool { return strings.ContainsAny(s, chars) },
		"parseInt":     func(s string) (int64, error) { return strconv.ParseInt(strings.TrimSpace(s), 10, 64) },
		"parseFloat":   func(s string) (float64, error) { return strconv.ParseFloat(strings.TrimSpace(s), 64) },
		"parseBool":    func(s string) (bool, error) { return strconv.ParseBool(strings.TrimSpace(s)) },
		"base64Encode": func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
		"base64Decode": func(s string) (string, error) {
			b, err := base64.StdEncoding.DecodeString(s)
			return string(b), err
		},
		"toJSON": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"regexReplaceAll": func(re, repl, s string) (string, error) {
			r, err := regexp.Compile(re)
			if err != nil {
				return "", err
			}
			return r.ReplaceAllString(s, repl), nil
		},
		"regexMatch": func(re, s string) (bool, error) { return regexp.MatchString(re, s) },
	}
}

// consulQuery splits consul-template's service query
// [tag.]name[@datacenter][|filter] into its tag and name. A service name
// in hivelet has no dot, so a dot separates the tag.
func consulQuery(q string) (tag, name string) {
	q, _, _ = strings.Cut(q, "|")
	q, _, _ = strings.Cut(q, "@")
	q = strings.TrimSpace(q)
	if i := strings.LastIndex(q, "."); i >= 0 {
		return q[:i], q[i+1:]
	}
	return "", q
}

// Error is a problem in a template, at a line of its text (1-based; 0 when
// unknown).
type Error struct {
	Line    int
	Message string
}

func (e *Error) Error() string { return e.Message }

var lineRE = regexp.MustCompile(`^template: [^:]*:(\d+):(?:\d+:)? ?(.*)$`)
var undefinedRE = regexp.MustCompile(`function "([^"]+)" not defined`)

// Check parses a template with the given delimiters ("" = {{ }}) and
// reports the first problem: a syntax error or a function hivelet does not
// have, with its line.
func Check(text, left, right string) error {
	_, err := parse(text, left, right, Sources{})
	return err
}

func parse(text, left, right string, src Sources) (*template.Template, error) {
	t, err := template.New("t").Delims(left, right).Option("missingkey=zero").Funcs(funcs(src)).Parse(text)
	if err == nil {
		return t, nil
	}
	msg := err.Error()
	line := 0
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if m := undefinedRE.FindStringSubmatch(msg); m != nil {
		name := m[1]
		if why, ok := unavailable[name]; ok {
			msg = fmt.Sprintf("template function %q is not available in hivelet (%s)", name, why)
		} else {
			msg = fmt.Sprintf("template function %q is not available in hivelet (available: %s, and text/template's own)", name, strings.Join(Names(), ", "))
		}
	}
	return nil, &Error{Line: line, Message: msg}
}

// Render renders a template from its sources.
func Render(text, left, right string, src Sources) ([]byte, error) {
	t, err := parse(text, left, right, src)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if err := t.Execute(&b, nil); err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	return []byte(b.String()), nil
}

// ParseEnvFile reads a rendered env = true file: KEY=VALUE lines; blank
// lines and lines starting with # are skipped; an optional "export " and
// matching quotes around the value are removed.
func ParseEnvFile(data []byte) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("line %d: want KEY=VALUE, got %q", i+1, line)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	return out, nil
}

// kvItem splits a Consul KV key into the variable path and item it reads
// in hivelet's variables store: "a/b/c" is item c of variable a/b.
func kvItem(key string) (path, item string, err error) {
	key = strings.Trim(key, "/")
	i := strings.LastIndex(key, "/")
	if i <= 0 || i == len(key)-1 {
		return "", "", fmt.Errorf("key %q: hivelet reads a Consul key as an item of a variable, path/item (key \"app/config/name\" is item name of variable app/config); this one has no path", key)
	}
	return key[:i], key[i+1:], nil
}

// readKey reads a Consul KV key from the variables store (kvItem): its
// value, and whether the variable and its item exist.
func readKey(readVar VarLookup, key string) (string, bool, error) {
	path, item, err := kvItem(key)
	if err != nil {
		return "", false, err
	}
	items, ok, err := readVar(path)
	if err != nil || !ok {
		return "", false, err
	}
	v, ok := items[item]
	return v, ok, nil
}

package driver

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/hivelet/hivelet/internal/typo"
)

// FieldError is one problem with one key of a task config block.
type FieldError struct {
	// Path locates the key: "command", "ports[1].host".
	Path    string
	Message string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Message }

// ConfigError lists every problem found in a config block, sorted by path,
// so an operator fixes them all in one go.
type ConfigError struct {
	Fields []*FieldError
}

func (e *ConfigError) Error() string {
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Error()
	}
	return "invalid driver config: " + strings.Join(msgs, "; ")
}

// ValidateConfig checks a task's config block against a driver's schema:
// required keys present, no unknown keys, every value of its declared type
// (recursively for list(object) fields). It returns nil or a *ConfigError
// naming each offending field. Numbers may be any Go integer or float type
// (JSON and HCL decoders differ); a list(string) may be []string or []any
// of strings; a map(string) may be map[string]string or map[string]any of
// strings, or a list of one such map (the block form: config { ... }).
func ValidateConfig(schema *Schema, cfg map[string]any) error {
	var errs []*FieldError
	validateObject(schema, cfg, "", &errs)
	if len(errs) == 0 {
		return nil
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path })
	return &ConfigError{Fields: errs}
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func validateObject(schema *Schema, cfg map[string]any, prefix string, errs *[]*FieldError) {
	var fields map[string]*Field
	if schema != nil {
		fields = schema.Fields
	}
	for key, f := range fields {
		if f == nil {
			continue
		}
		if _, ok := cfg[key]; !ok && f.Required {
			*errs = append(*errs, &FieldError{Path: join(prefix, key), Message: "required " + string(f.Type) + " is missing"})
		}
	}
	for key, v := range cfg {
		path := join(prefix, key)
		f, ok := fields[key]
		if !ok || f == nil {
			*errs = append(*errs, &FieldError{Path: path, Message: "unknown key" + suggest(key, fields)})
			continue
		}
		validateValue(f, v, path, errs)
	}
}

func validateValue(f *Field, v any, path string, errs *[]*FieldError) {
	bad := func(format string, args ...any) {
		*errs = append(*errs, &FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if v == nil {
		if f.Required {
			bad("required %s is null", f.Type)
		}
		return
	}
	switch f.Type {
	case TypeString:
		if _, ok := v.(string); !ok {
			bad("must be a string, got %s", describe(v))
		}
	case TypeNumber:
		if !isNumber(v) {
			bad("must be a number, got %s", describe(v))
		}
	case TypeBool:
		if _, ok := v.(bool); !ok {
			bad("must be a bool, got %s", describe(v))
		}
	case TypeStringList:
		switch l := v.(type) {
		case []string:
		case []any:
			for i, e := range l {
				if _, ok := e.(string); !ok {
					*errs = append(*errs, &FieldError{Path: fmt.Sprintf("%s[%d]", path, i), Message: "must be a string, got " + describe(e)})
				}
			}
		default:
			bad("must be a list of strings, got %s", describe(v))
		}
	case TypeStringMap:
		// A job file writes a map either as an attribute (env = { ... })
		// or as a block (config { ... }), which decodes as a list of one
		// object.
		if l, ok := v.([]any); ok && len(l) == 1 {
			v = l[0]
		} else if l, ok := v.([]map[string]any); ok && len(l) == 1 {
			v = l[0]
		}
		switch m := v.(type) {
		case map[string]string:
		case map[string]any:
			for k, e := range m {
				if _, ok := e.(string); !ok {
					*errs = append(*errs, &FieldError{Path: path + "." + k, Message: "must be a string, got " + describe(e)})
				}
			}
		case []any, []map[string]any:
			bad("must be a map of strings, written once, got %s of several", describe(v))
		default:
			bad("must be a map of strings, got %s", describe(v))
		}
	case TypeObjectList:
		switch l := v.(type) {
		case []map[string]any:
			for i, e := range l {
				validateObject(f.Elem, e, fmt.Sprintf("%s[%d]", path, i), errs)
			}
		case []any:
			for i, e := range l {
				p := fmt.Sprintf("%s[%d]", path, i)
				m, ok := e.(map[string]any)
				if !ok {
					*errs = append(*errs, &FieldError{Path: p, Message: "must be an object, got " + describe(e)})
					continue
				}
				validateObject(f.Elem, m, p, errs)
			}
		default:
			bad("must be a list of objects, got %s", describe(v))
		}
	default:
		bad("the driver's schema declares unknown type %q", f.Type)
	}
}

func isNumber(v any) bool {
	switch n := v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32:
		return true
	case float64:
		return !math.IsNaN(n) && !math.IsInf(n, 0)
	case json.Number:
		_, err := n.Float64()
		return err == nil
	}
	return false
}

func describe(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a bool"
	case []any, []string, []map[string]any:
		return "a list"
	case map[string]any, map[string]string:
		return "an object"
	}
	if isNumber(v) {
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// suggest names the closest known key when an unknown one looks like a typo.
func suggest(key string, fields map[string]*Field) string {
	best, bestD := "", 3
	for k := range fields {
		if d := typo.Distance(key, k); d < bestD || (d == bestD && best != "" && k < best) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// DecodeConfig copies a validated config block into a driver's own config
// struct through JSON, so the struct's `json` tags name the keys. Numbers
// decode into any numeric field; durations are best declared as strings and
// parsed with time.ParseDuration.
func DecodeConfig(cfg map[string]any, out any) error {
	b, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encoding driver config: %w", err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding driver config: %w", err)
	}
	return nil
}

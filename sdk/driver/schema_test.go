package driver_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/sdk/driver"
)

var testSchema = &driver.Schema{Fields: map[string]*driver.Field{
	"command": {Type: driver.TypeString, Required: true},
	"args":    {Type: driver.TypeStringList},
	"env":     {Type: driver.TypeStringMap},
	"count":   {Type: driver.TypeNumber},
	"debug":   {Type: driver.TypeBool},
	"ports": {Type: driver.TypeObjectList, Elem: &driver.Schema{Fields: map[string]*driver.Field{
		"host":  {Type: driver.TypeNumber, Required: true},
		"label": {Type: driver.TypeString},
	}}},
}}

func TestValidateConfigReportsEveryBadFieldByPath(t *testing.T) {
	cases := []struct {
		name string
		cfg  map[string]any
		want []string // "path: message"
	}{
		{"valid with every type", map[string]any{
			"command": "/bin/sh", "args": []any{"-c", "x"}, "env": map[string]any{"A": "b"},
			"count": 3.0, "debug": true, "ports": []any{map[string]any{"host": 8080, "label": "http"}},
		}, nil},
		{"valid with Go-typed values", map[string]any{
			"command": "x", "args": []string{"a"}, "env": map[string]string{"A": "b"}, "count": int64(2),
		}, nil},
		{"missing required", map[string]any{"args": []any{}}, []string{"command: required string is missing"}},
		{"null required", map[string]any{"command": nil}, []string{"command: required string is null"}},
		{"wrong scalar types", map[string]any{"command": 1, "count": "3", "debug": "yes"}, []string{
			"command: must be a string, got a number",
			"count: must be a number, got a string",
			"debug: must be a bool, got a string",
		}},
		{"bad list element", map[string]any{"command": "x", "args": []any{"ok", 2}}, []string{"args[1]: must be a string, got a number"}},
		{"list given a string", map[string]any{"command": "x", "args": "a b"}, []string{"args: must be a list of strings, got a string"}},
		{"a map written as a block", map[string]any{"command": "x", "env": []any{map[string]any{"A": "b"}}}, nil},
		{"a map block with a bad value", map[string]any{"command": "x", "env": []any{map[string]any{"A": 1}}}, []string{"env.A: must be a string, got a number"}},
		{"a map block written twice", map[string]any{"command": "x", "env": []any{map[string]any{"A": "b"}, map[string]any{"C": "d"}}}, []string{"env: must be a map of strings, written once, got a list of several"}},
		{"bad map value", map[string]any{"command": "x", "env": map[string]any{"A": true}}, []string{"env.A: must be a string, got a bool"}},
		{"unknown key with suggestion", map[string]any{"command": "x", "comand": "y"}, []string{`comand: unknown key (did you mean "command"?)`}},
		{"unknown key without suggestion", map[string]any{"command": "x", "zzzzzz": 1}, []string{"zzzzzz: unknown key"}},
		{"nested object errors", map[string]any{"command": "x", "ports": []any{
			map[string]any{"host": 1}, map[string]any{"label": 2}, "oops",
		}}, []string{
			"ports[1].host: required number is missing",
			"ports[1].label: must be a string, got a number",
			"ports[2]: must be an object, got a string",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := driver.ValidateConfig(testSchema, tc.cfg)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			var ce *driver.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			var got []string
			for _, f := range ce.Fields {
				got = append(got, f.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("errors:\n got  %q\n want %q", got, tc.want)
			}
		})
	}
}

func TestDecodeConfigFillsTheDriversStruct(t *testing.T) {
	var out struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
		Count   int      `json:"count"`
	}
	if err := driver.DecodeConfig(map[string]any{"command": "c", "args": []any{"a"}, "count": 2.0}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Command != "c" || len(out.Args) != 1 || out.Count != 2 {
		t.Fatalf("decoded %+v", out)
	}
	if err := driver.DecodeConfig(map[string]any{"count": "x"}, &out); err == nil {
		t.Fatal("a string decoded into an int field")
	}
}

// TestNoSuggestionIsComputedPastTheLengthBound: the suggestion's edit
// distance costs the product of the two lengths, so past 64 bytes no
// distance is computed and nothing is suggested, even for a one-letter
// typo of a long field; the control, the same typo of a short field, gets
// its suggestion.
func TestNoSuggestionIsComputedPastTheLengthBound(t *testing.T) {
	long := strings.Repeat("x", 70)
	schema := &driver.Schema{Fields: map[string]*driver.Field{
		"command": {Type: driver.TypeString},
		long:      {Type: driver.TypeString},
	}}
	huge := strings.Repeat("command", 100_000)
	for _, c := range []struct {
		key, want string
	}{
		{"comand", `comand: unknown key (did you mean "command"?)`},
		{long[1:] + "y", long[1:] + "y: unknown key"},
		{huge, huge + ": unknown key"},
	} {
		err := driver.ValidateConfig(schema, map[string]any{c.key: "v"})
		var ce *driver.ConfigError
		if !errors.As(err, &ce) || len(ce.Fields) != 1 || ce.Fields[0].Error() != c.want {
			t.Errorf("key of %d bytes: %v", len(c.key), err)
		}
	}
}

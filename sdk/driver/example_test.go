package driver_test

import (
	"errors"
	"fmt"

	"github.com/hivelet/hivelet/sdk/driver"
)

// A driver declares its config block; the host (and the driver itself, in
// StartTask) validates a task's config against it and gets every problem,
// by path, in one error.
func ExampleValidateConfig() {
	schema := &driver.Schema{Fields: map[string]*driver.Field{
		"command": {Type: driver.TypeString, Required: true},
		"args":    {Type: driver.TypeStringList},
		"ports": {Type: driver.TypeObjectList, Elem: &driver.Schema{Fields: map[string]*driver.Field{
			"host": {Type: driver.TypeNumber, Required: true},
		}}},
	}}
	err := driver.ValidateConfig(schema, map[string]any{
		"comand": "/bin/server",
		"args":   []any{"-v", 2},
		"ports":  []any{map[string]any{"host": 8080}, map[string]any{}},
	})
	var ce *driver.ConfigError
	if errors.As(err, &ce) {
		for _, f := range ce.Fields {
			fmt.Println(f)
		}
	}
	// Output:
	// args[1]: must be a string, got a number
	// comand: unknown key (did you mean "command"?)
	// command: required string is missing
	// ports[1].host: required number is missing
}

// A driver decodes a validated config block into its own struct.
func ExampleDecodeConfig() {
	var cfg struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	if err := driver.DecodeConfig(map[string]any{"command": "/bin/server", "args": []any{"-v"}}, &cfg); err != nil {
		panic(err)
	}
	fmt.Println(cfg.Command, cfg.Args)
	// Output: /bin/server [-v]
}

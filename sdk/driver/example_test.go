package driver_test

import (
	"context"
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

// A driver keeps its tasks in a Tasks table and gives each an Exit latch:
// the code that sees the task end calls Finish once, WaitTask is the latch's
// WaitChan, and an unknown ID is ErrTaskNotFound.
func ExampleTasks() {
	type task struct {
		exit driver.Exit
	}
	tasks := driver.NewTasks[*task]("demo task")
	if _, added := tasks.Add("web", &task{}, func(old *task) bool { return !old.exit.Exited() }); !added {
		panic("web is already running")
	}

	// WaitTask:
	t, _ := tasks.Get("web")
	results := t.exit.WaitChan(context.Background())

	// The task's own goroutine, when it ends:
	fmt.Println("first finish:", t.exit.Finish(&driver.ExitResult{ExitCode: 2}))
	fmt.Println("second finish:", t.exit.Finish(&driver.ExitResult{ExitCode: 0}))

	fmt.Println("exit code:", (<-results).ExitCode)
	_, err := tasks.Get("db")
	fmt.Println(err, errors.Is(err, driver.ErrTaskNotFound))
	// Output:
	// first finish: true
	// second finish: false
	// exit code: 2
	// demo task db: task not found true
}

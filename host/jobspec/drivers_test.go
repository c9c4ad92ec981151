package jobspec_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hivelet/hivelet/host/jobspec"
	"github.com/hivelet/hivelet/plugins/docker"
	"github.com/hivelet/hivelet/plugins/exec"
	"github.com/hivelet/hivelet/plugins/mock"
	"github.com/hivelet/hivelet/sdk/driver"
)

// TestExampleConfigsMatchTheBuiltInDriversSchemas keeps the examples
// runnable: the parser leaves config free-form, so this checks each task's
// config against its driver's schema, as the driver will at start.
func TestExampleConfigsMatchTheBuiltInDriversSchemas(t *testing.T) {
	schemas := map[string]*driver.Schema{"docker": docker.Schema(), "exec": exec.Schema(), "mock": mock.Schema()}
	files, err := filepath.Glob("../../examples/jobs/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		job, err := jobspec.Parse(f, data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range job.Groups {
			for _, task := range g.Tasks {
				schema, ok := schemas[task.Driver]
				if !ok {
					t.Errorf("%s: task %s uses driver %q, which is not built in", f, task.Name, task.Driver)
					continue
				}
				cfg := task.Config
				if cfg == nil {
					cfg = map[string]any{}
				}
				if err := driver.ValidateConfig(schema, cfg); err != nil {
					t.Errorf("%s: task %s: %v", f, task.Name, err)
				}
				checked++
			}
		}
	}
	if checked < 6 {
		t.Fatalf("checked %d task configs, want at least 6", checked)
	}
	// Control: a Nomad-style docker config the driver does not take is caught.
	bad := map[string]any{"image": "x", "ulimit": []any{map[string]any{"nofile": "1024"}}}
	if driver.ValidateConfig(docker.Schema(), bad) == nil {
		t.Fatal("the docker schema accepted ulimit: the check proves nothing")
	}
}

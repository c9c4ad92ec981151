package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// execJob runs the root command with args and returns stdout, stderr and
// the exit code run() would return.
func execJob(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	code := 0
	if err := root.Execute(); err != nil {
		code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
	}
	return out.String(), errOut.String(), code
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const validJob = `job "web" {
  type = "system"
  group "g" {
    task "t" {
      driver = "mock"
    }
  }
}
`

func TestJobValidatePrintsOneOKLineOrEveryErrorWithExitCode2(t *testing.T) {
	good := writeFile(t, "good.hcl", validJob)
	out, _, code := execJob(t, "job", "validate", good)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "OK") || !strings.Contains(out, `"web"`) {
		t.Fatalf("valid file: code %d, stdout %q", code, out)
	}

	bad := writeFile(t, "bad.hcl", `job "web" {
  type = "service"
  group "g" {
    count = -1
    task "t" {
      vault {}
    }
  }
}
`)
	out, errOut, code := execJob(t, "job", "validate", bad)
	if code != 2 {
		t.Fatalf("invalid file: exit code %d, want 2", code)
	}
	if out != "" {
		t.Errorf("invalid file printed to stdout: %q", out)
	}
	for _, want := range []string{
		bad + `:2:10: job type "service" is not supported`,
		bad + `:4:13: count must be 0 or more, got -1`,
		bad + `:6:7: stanza "vault" is not supported by hivelet (`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestJobInspectPrintsCanonicalJSONThatDecodes(t *testing.T) {
	path := writeFile(t, "web.hcl", validJob)
	out, _, code := execJob(t, "job", "inspect", path)
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	j, err := model.DecodeJob([]byte(out))
	if err != nil {
		t.Fatalf("inspect output does not decode: %v\n%s", err, out)
	}
	if j.ID != "web" || j.Groups[0].Update == nil || j.Groups[0].Update.MaxParallel != model.DefaultMaxParallel {
		t.Errorf("inspected job = %+v", j)
	}
	// The JSON it prints is itself a job file that inspects to the same bytes.
	again, _, code := execJob(t, "job", "inspect", writeFile(t, "web.json", out))
	if code != 0 || again != out {
		t.Errorf("inspect of the inspected JSON differs (code %d):\n%s\n---\n%s", code, out, again)
	}
}

func TestJobCommandsRejectBadUsageAndMissingFilesWithExitCode2(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.hcl")
	cases := [][]string{
		{"job", "validate", missing},
		{"job", "inspect", missing},
		{"job", "validate", writeFile(t, "job.yaml", validJob)},
		{"job", "validate"},
		{"job", "inspect", "a.hcl", "b.hcl"},
	}
	for _, args := range cases {
		if _, _, code := execJob(t, args...); code != 2 {
			t.Errorf("%v: exit code %d, want 2", args, code)
		}
	}
	// Control: the same command on a valid file succeeds through run().
	if code := run([]string{"job", "validate", writeFile(t, "ok.hcl", validJob)}); code != 0 {
		t.Errorf("run(job validate ok.hcl) = %d, want 0", code)
	}
	if code := run([]string{"job", "validate", missing}); code != 2 {
		t.Errorf("run(job validate missing) = %d, want 2", code)
	}
}

// TestJobValidateAndInspectTakeVarVarFileAndTheEnvironment: -var overrides
// a -var-file, which overrides HIVELET_VAR_*; the default stands when
// nothing is given (control), and an undeclared -var is bad input.
func TestJobValidateAndInspectTakeVarVarFileAndTheEnvironment(t *testing.T) {
	job := writeFile(t, "vars.hcl", `variable "group_count" {
  type    = number
  default = 1
}
variable "image" {
  default = "exporter:1"
}
job "web" {
  type = "system"
  group "g" {
    count = var.group_count
    task "t" {
      driver = "docker"
      config { image = var.image }
    }
  }
}
`)
	varFile := writeFile(t, "prod.hcl", "group_count = 3\nimage = \"from-file\"\n")
	inspect := func(args ...string) (*model.Job, int, string) {
		out, errOut, code := execJob(t, goStyleFlags(append([]string{"job", "inspect", job}, args...))...)
		if code != 0 {
			return nil, code, errOut
		}
		var j model.Job
		if err := model.Decode([]byte(out), &j); err != nil {
			t.Fatal(err)
		}
		return &j, code, errOut
	}
	j, code, errOut := inspect()
	if code != 0 {
		t.Fatalf("defaults: exit %d: %s", code, errOut)
	}
	if j.Groups[0].Count != 1 || j.Groups[0].Tasks[0].Config["image"] != "exporter:1" {
		t.Fatalf("defaults: code %d %s %+v", code, errOut, j)
	}
	t.Setenv("HIVELET_VAR_image", "from-env")
	j, _, _ = inspect()
	if j.Groups[0].Tasks[0].Config["image"] != "from-env" {
		t.Fatalf("environment: %v", j.Groups[0].Tasks[0].Config)
	}
	j, _, _ = inspect("-var-file", varFile)
	if j.Groups[0].Count != 3 || j.Groups[0].Tasks[0].Config["image"] != "from-file" {
		t.Fatalf("var file over the environment: %+v", j.Groups[0])
	}
	j, _, _ = inspect("-var-file", varFile, "-var", "group_count=5")
	if j.Groups[0].Count != 5 {
		t.Fatalf("-var over the var file: count %d", j.Groups[0].Count)
	}
	out, errOut, code := execJob(t, goStyleFlags([]string{"job", "validate", job, "-var", "grup_count=2"})...)
	if code != 2 || out != "" || !strings.Contains(errOut, `-var grup_count=2: no variable "grup_count" is declared in this file (did you mean "group_count"?)`) {
		t.Fatalf("undeclared -var: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

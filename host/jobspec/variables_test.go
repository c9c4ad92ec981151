package jobspec

import (
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"
)

const varsJob = `variable "image" {
  type    = string
  default = "exporter:1"
}

variable "dcs" {
  type    = list(string)
  default = ["dc1"]
}

variable "cpu" {
  type    = number
  default = 100
  validation {
    condition     = var.cpu >= 50
    error_message = "cpu must be at least 50 MHz."
  }
}

variable "verbose" {
  type    = bool
  default = false
}

locals {
  args = concat(["--port=${NOMAD_PORT_metrics}"], var.verbose ? ["-v"] : [])
  name = upper(replace(var.image, ":", "-"))
}

job "exporter" {
  type        = "system"
  datacenters = var.dcs

  group "g" {
    network {
      port "metrics" {}
    }
    task "t" {
      driver = "docker"
      config {
        image = "${var.image}"
        args  = local.args
        ports = ["metrics"]
      }
      env {
        NAME    = local.name
        ADDR    = "${var.image}@${NOMAD_ADDR_metrics}"
        BANNER  = "%{ if var.verbose }loud%{ else }quiet%{ endif }"
        ENCODED = base64encode(var.image)
      }
      resources {
        cpu = var.cpu * 2
      }
    }
  }
}
`

func parseVars(t *testing.T, in Inputs) (*modelJobView, error) {
	t.Helper()
	j, err := ParseHCLWith("exporter.hcl", []byte(varsJob), in)
	if err != nil {
		return nil, err
	}
	task := j.Groups[0].Tasks[0]
	return &modelJobView{dcs: j.Datacenters, image: task.Config["image"].(string), args: task.Config["args"], env: task.Env, cpu: task.Resources.CPU}, nil
}

type modelJobView struct {
	dcs   []string
	image string
	args  any
	env   map[string]string
	cpu   int
}

// TestVariablesTakeDefaultsThenTheEnvironmentThenFilesThenFlags: every
// source of a value, each overriding the one before, and what the file
// computes from them (locals, functions, directives) next to the
// run-time interpolations it keeps as text.
func TestVariablesTakeDefaultsThenTheEnvironmentThenFilesThenFlags(t *testing.T) {
	got, err := parseVars(t, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	if got.image != "exporter:1" || !reflect.DeepEqual(got.dcs, []string{"dc1"}) || got.cpu != 200 {
		t.Fatalf("defaults: %+v", got)
	}
	if !reflect.DeepEqual(got.args, []any{"--port=${NOMAD_PORT_metrics}"}) {
		t.Errorf("local over a run-time interpolation: %#v", got.args)
	}
	wantEnv := map[string]string{"NAME": "EXPORTER-1", "ADDR": "exporter:1@${NOMAD_ADDR_metrics}", "BANNER": "quiet", "ENCODED": "ZXhwb3J0ZXI6MQ=="}
	if !reflect.DeepEqual(got.env, wantEnv) {
		t.Errorf("env = %v, want %v", got.env, wantEnv)
	}

	in := Inputs{
		Env: []string{"NOMAD_VAR_image=from-nomad-env", "HIVELET_VAR_cpu=300", "NOMAD_VAR_cpu=60", "HIVELET_VAR_undeclared=x", "PATH=/bin"},
		Files: []VarFile{
			{Name: "a.hcl", Src: []byte("dcs = [\"dc2\", \"dc3\"]\nverbose = true\n")},
			{Name: "b.json", Src: []byte(`{"image": "from-json-file"}`)},
		},
		Vars: []string{"image=from-flag", "cpu=75"},
	}
	got, err = parseVars(t, in)
	if err != nil {
		t.Fatal(err)
	}
	if got.image != "from-flag" || got.cpu != 150 || !reflect.DeepEqual(got.dcs, []string{"dc2", "dc3"}) {
		t.Fatalf("overrides: %+v", got)
	}
	if !reflect.DeepEqual(got.args, []any{"--port=${NOMAD_PORT_metrics}", "-v"}) || got.env["BANNER"] != "loud" {
		t.Errorf("verbose from the var file: args %#v, banner %q", got.args, got.env["BANNER"])
	}
	// HIVELET_VAR_ wins over NOMAD_VAR_; a var file over the environment.
	got, err = parseVars(t, Inputs{Env: in.Env, Files: in.Files[1:]})
	if err != nil || got.image != "from-json-file" || got.cpu != 600 {
		t.Fatalf("environment and file: %+v %v", got, err)
	}
	got, err = parseVars(t, Inputs{Env: in.Env})
	if err != nil || got.image != "from-nomad-env" {
		t.Fatalf("environment alone: %+v %v", got, err)
	}
}

func TestBadVariableValuesAreReportedWithTheirSource(t *testing.T) {
	cases := []struct {
		name string
		in   Inputs
		want []string
	}{
		{"flag of the wrong type", Inputs{Vars: []string{"cpu=lots"}}, []string{`exporter.hcl:11:1: -var cpu=lots: want number, got "lots"`}},
		{"flag naming no variable", Inputs{Vars: []string{"imgae=x"}}, []string{`exporter.hcl: -var imgae=x: no variable "imgae" is declared in this file (did you mean "image"?)`}},
		{"flag without a value", Inputs{Vars: []string{"image"}}, []string{`exporter.hcl: -var image: write it as -var name=value`}},
		{"environment of the wrong type", Inputs{Env: []string{"HIVELET_VAR_verbose=maybe"}}, []string{`exporter.hcl:20:1: HIVELET_VAR_verbose from the environment: want bool, got "maybe"`}},
		{"var file naming no variable", Inputs{Files: []VarFile{{Name: "v.hcl", Src: []byte("image = \"a\"\ncpus = 2\n")}}},
			[]string{`v.hcl:2:1: no variable "cpus" is declared in exporter.hcl (did you mean "cpu"?)`}},
		{"var file of the wrong type", Inputs{Files: []VarFile{{Name: "v.hcl", Src: []byte("dcs = 3\n")}}}, []string{`v.hcl:1:7: variable "dcs" must be list(string)`}},
		{"var file syntax", Inputs{Files: []VarFile{{Name: "v.hcl", Src: []byte("dcs = \n")}}}, []string{`v.hcl:1:7:`}},
		{"a rule that fails", Inputs{Vars: []string{"cpu=10"}}, []string{`exporter.hcl:15:21: variable "cpu": cpu must be at least 50 MHz.`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseVars(t, c.in)
			if err == nil {
				t.Fatal("accepted")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(c.want) {
				t.Fatalf("errors:\n%v\nwant %d", err, len(c.want))
			}
			for i, w := range c.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %q, want it to start with %q", lines[i], w)
				}
			}
		})
	}
}

func TestAJSONJobTakesNoVariables(t *testing.T) {
	if _, err := ParseWith("j.json", []byte(`{"id":"j","type":"system","groups":[]}`), Inputs{Vars: []string{"a=b"}}); err == nil ||
		!strings.Contains(err.Error(), "a JSON job has no variables") {
		t.Fatalf("JSON with -var: %v", err)
	}
	// Control: the environment is not an input given for this file.
	if _, err := ParseWith("j.json", []byte(`{"id":"j","type":"system","groups":[]}`), Inputs{Env: []string{"HIVELET_VAR_a=b"}}); err != nil &&
		strings.Contains(err.Error(), "no variables") {
		t.Fatalf("the environment was taken as a -var: %v", err)
	}
}

// TestTheFunctionsNomadJobFilesUseEvaluateOrAreRefusedWithTheReason: each
// call in a task's env; a value is checked, a refusal must name the
// function's position and its reason. file() reads through Inputs.ReadFile
// and is refused where there is none (the HTTP API).
func TestTheFunctionsNomadJobFilesUseEvaluateOrAreRefusedWithTheReason(t *testing.T) {
	files := map[string]string{"conf/app.yml": "port: 9100\n"}
	readFile := func(path string) ([]byte, error) {
		if s, ok := files[path]; ok {
			return []byte(s), nil
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	for _, c := range []struct {
		expr, want string
		read       bool
	}{
		{`tostring(3)`, "3", false},
		{`tonumber("4") + 1`, "5", false},
		{`tobool("true") ? "y" : "n"`, "y", false},
		{`join(",", tolist(toset(["b", "a", "b"])))`, "a,b", false},
		{`tomap({a = "x"}).a`, "x", false},
		{`strlen("héllo")`, "5", false},
		{`urlencode("a b&c")`, "a+b%26c", false},
		{`yamlencode({sources = {docker = {type = "docker_logs", ports = [1, 2]}}})`, "sources:\n    docker:\n        ports:\n            - 1\n            - 2\n        type: docker_logs\n", false},
		{`yamldecode(file("conf/app.yml")).port + 1`, "9101", true},
		{`yamldecode(": : :")`, `f.hcl:7:13: Error in function call: Call to function "yamldecode" failed: not YAML`, false},
		{`file("conf/app.yml")`, "port: 9100\n", true},
		{`fileexists("conf/app.yml") ? "yes" : "no"`, "yes", true},
		{`fileexists("conf/none.yml") ? "yes" : "no"`, "no", true},
		{`file("conf/none.yml")`, `f.hcl:7:13: Error in function call: Call to function "file" failed: open conf/none.yml: file does not exist.`, true},
		{`file("conf/app.yml")`, `f.hcl:7:13: Error in function call: Call to function "file" failed: not available in hivelet: this job file was not read from the author's machine`, false},
		{`timestamp()`, `f.hcl:7:13: Error in function call: Call to function "timestamp" failed: not available in hivelet: a job file's value would change each time it is read`, false},
		{`uuidv4()`, `f.hcl:7:13: Error in function call: Call to function "uuidv4" failed: not available in hivelet`, false},
		{`nosuch(1)`, `f.hcl:7:13: Call to unknown function: There is no function named "nosuch".`, false},
	} {
		src := fmt.Sprintf("job \"j\" {\n  type = \"system\"\n  group \"g\" {\n    task \"t\" {\n      driver = \"exec\"\n      env {\n        V = %s\n      }\n      config {\n        command = \"/bin/true\"\n      }\n    }\n  }\n}\n", c.expr)
		in := Inputs{}
		if c.read {
			in.ReadFile = readFile
		}
		job, err := ParseWith("f.hcl", []byte(src), in)
		if strings.HasPrefix(c.want, "f.hcl:") {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s (read %v): error %v, want %q", c.expr, c.read, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got := job.Groups[0].Tasks[0].Env["V"]; got != c.want {
			t.Errorf("%s = %q, want %q", c.expr, got, c.want)
		}
	}
}

// TestATemplateWhoseDataFailsIsReportedOnce: a template's data that does
// not evaluate is one error, at the call, not also "needs exactly one of
// data and source"; control: a template with neither still gets that one.
func TestATemplateWhoseDataFailsIsReportedOnce(t *testing.T) {
	src := "job \"j\" {\n  type = \"system\"\n  group \"g\" {\n    task \"t\" {\n      driver = \"exec\"\n      config {\n        command = \"/bin/true\"\n      }\n      template {\n        destination = \"local/a\"\n%s      }\n    }\n  }\n}\n"
	_, err := ParseWith("f.hcl", []byte(fmt.Sprintf(src, "        data = nosuch({})\n")), Inputs{})
	if err == nil || err.Error() != `f.hcl:11:16: Call to unknown function: There is no function named "nosuch".` {
		t.Fatalf("data that fails: %v", err)
	}
	_, err = ParseWith("f.hcl", []byte(fmt.Sprintf(src, "")), Inputs{})
	if err == nil || !strings.Contains(err.Error(), "a template needs exactly one of data (the text) and source (a file on the node)") {
		t.Fatalf("neither data nor source: %v", err)
	}
}

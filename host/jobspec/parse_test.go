package jobspec

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

func mustParse(t *testing.T, name, src string) *model.Job {
	t.Helper()
	j, err := Parse(name, []byte(src))
	if err != nil {
		t.Fatalf("parse %s:\n%v", name, err)
	}
	return j
}

func d(s string) model.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return model.Duration(v)
}

func TestGroupUpdateOverridesTheJobsFieldByFieldOverTheDefaults(t *testing.T) {
	j := mustParse(t, "inherit.hcl", `
job "j" {
  type = "system"
  update {
    max_parallel     = 3
    canary           = 20
    min_healthy_time = "30s"
    canary_policy "spread" {
      attribute = "${node.datacenter}"
    }
  }
  group "inherits" {
    task "t" { driver = "mock" }
  }
  group "overrides" {
    update {
      canary           = 0
      healthy_deadline = "2m"
    }
    task "t" { driver = "mock" }
  }
}`)
	spread := &model.PolicyRef{Name: "spread", Params: map[string]string{"attribute": "${node.datacenter}"}}
	wantJob := &model.UpdateStrategy{MaxParallel: 3, Canary: 20, MinHealthyTime: d("30s"),
		HealthyDeadline: model.DefaultHealthyDeadline, ProgressDeadline: model.DefaultProgressDeadline, CanaryPolicy: spread}
	if !reflect.DeepEqual(j.Update, wantJob) {
		t.Errorf("job update = %+v, want %+v", j.Update, wantJob)
	}
	if got := j.LookupGroup("inherits").Update; !reflect.DeepEqual(got, wantJob) {
		t.Errorf("inheriting group = %+v, want the job's %+v", got, wantJob)
	}
	wantOver := &model.UpdateStrategy{MaxParallel: 3, Canary: 0, MinHealthyTime: d("30s"),
		HealthyDeadline: d("2m"), ProgressDeadline: model.DefaultProgressDeadline, CanaryPolicy: spread}
	if got := j.LookupGroup("overrides").Update; !reflect.DeepEqual(got, wantOver) {
		t.Errorf("overriding group = %+v, want %+v", got, wantOver)
	}
	// Groups do not share policy references: changing one leaves the rest.
	j.LookupGroup("inherits").Update.CanaryPolicy.Params["attribute"] = "changed"
	if j.Update.CanaryPolicy.Params["attribute"] != "${node.datacenter}" {
		t.Error("a group's policy params alias the job's")
	}
}

func TestSystemJobWithNoUpdateAnywhereGetsTheDefaults(t *testing.T) {
	j := mustParse(t, "defaults.hcl", `
job "j" {
  type = "system"
  group "g" {
    task "t" { driver = "mock" }
  }
}`)
	if j.Update != nil {
		t.Errorf("job update = %+v, want nil (nothing was written)", j.Update)
	}
	g := j.Groups[0]
	if !reflect.DeepEqual(g.Update, model.DefaultUpdateStrategy()) {
		t.Errorf("group update = %+v, want defaults", g.Update)
	}
	if !reflect.DeepEqual(g.Restart, model.DefaultRestartPolicy(model.JobTypeSystem)) {
		t.Errorf("restart = %+v, want system default", g.Restart)
	}
	if g.Count != 1 {
		t.Errorf("count = %d, want the default 1", g.Count)
	}
	// Control: an explicit count and a partial restart block are kept,
	// the unset restart fields defaulted one by one.
	j = mustParse(t, "explicit.hcl", `
job "j" {
  type = "system"
  group "g" {
    count = 0
    restart { attempts = 7 }
    task "t" { driver = "mock" }
  }
}`)
	want := model.DefaultRestartPolicy(model.JobTypeSystem)
	want.Attempts = 7
	if !reflect.DeepEqual(j.Groups[0].Restart, want) || j.Groups[0].Count != 0 {
		t.Errorf("restart = %+v count = %d, want %+v and 0", j.Groups[0].Restart, j.Groups[0].Count, want)
	}
}

func TestSysbatchGroupsHaveNoUpdateAndTheSysbatchRestartDefault(t *testing.T) {
	j := mustParse(t, "batch.hcl", `
job "b" {
  type = "sysbatch"
  group "g" {
    task "t" { driver = "exec" }
  }
}`)
	if j.Update != nil || j.Groups[0].Update != nil {
		t.Errorf("sysbatch update: job %+v group %+v, want nil", j.Update, j.Groups[0].Update)
	}
	if !reflect.DeepEqual(j.Groups[0].Restart, model.DefaultRestartPolicy(model.JobTypeSysbatch)) {
		t.Errorf("restart = %+v, want the sysbatch default", j.Groups[0].Restart)
	}
}

func TestInterpolationsAreKeptAsText(t *testing.T) {
	j := mustParse(t, "interp.hcl", `
job "j" {
  type = "system"
  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }
  constraint {
    attribute = "${meta.rack}"
    operator  = "regexp"
    value     = "^${node.datacenter}-r[0-9]+$"
  }
  group "g" {
    meta { owner = "${env.USER}" }
    task "t" {
      driver = "docker"
      user   = "${NOMAD_META_user}"
      env {
        ADDR  = "http://${NOMAD_ADDR_http}/x"
        DC    = "${ node.datacenter }"
        PLAIN = "no interpolation"
        ESC   = "a\tb \"q\""
        COND  = "${attr.x == "y" ? "a" : "b"}"
      }
      config {
        args = ["-n", "${node.unique.name}", "${NOMAD_ALLOC_INDEX}"]
        script = <<EOT
echo ${NOMAD_TASK_NAME}
EOT
        nested {
          deeper { value = "${meta.deep}" }
        }
      }
    }
  }
}`)
	g := j.Groups[0]
	task := g.Tasks[0]
	checks := map[string][2]string{
		"constraint attribute": {j.Constraints[0].Attribute, "${attr.kernel.name}"},
		"regexp value":         {j.Constraints[1].Value, "^${node.datacenter}-r[0-9]+$"},
		"group meta":           {g.Meta["owner"], "${env.USER}"},
		"user":                 {task.User, "${NOMAD_META_user}"},
		"env template":         {task.Env["ADDR"], "http://${NOMAD_ADDR_http}/x"},
		"env spaces trimmed":   {task.Env["DC"], "${node.datacenter}"},
		"env plain":            {task.Env["PLAIN"], "no interpolation"},
		"env escapes":          {task.Env["ESC"], "a\tb \"q\""},
		"env conditional":      {task.Env["COND"], `${attr.x == "y" ? "a" : "b"}`},
		"config list":          {task.Config["args"].([]any)[1].(string), "${node.unique.name}"},
		"config heredoc":       {task.Config["script"].(string), "echo ${NOMAD_TASK_NAME}\n"},
		"config nested block": {task.Config["nested"].([]any)[0].(map[string]any)["deeper"].([]any)[0].(map[string]any)["value"].(string),
			"${meta.deep}"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
}

func TestConfigBlocksBecomeListsOfObjectsAtAnyDepth(t *testing.T) {
	j := mustParse(t, "config.hcl", `
job "j" {
  type = "system"
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image   = "x:local"
        ports   = ["http", "admin"]
        labels  = { a = "1", "b.c" = 2 }
        privileged = false
        cpu_hard_limit = 2.5
        port_map {
          http  = 8080
          admin = 9090
        }
        mount {
          type   = "bind"
          source = "/a"
        }
        mount {
          type = "tmpfs"
          tmpfs_options { size = 1000 }
        }
      }
    }
  }
}`)
	want := map[string]any{
		"image":          "x:local",
		"ports":          []any{"http", "admin"},
		"labels":         map[string]any{"a": "1", "b.c": float64(2)},
		"privileged":     false,
		"cpu_hard_limit": 2.5,
		"port_map":       []any{map[string]any{"http": float64(8080), "admin": float64(9090)}},
		"mount": []any{
			map[string]any{"type": "bind", "source": "/a"},
			map[string]any{"type": "tmpfs", "tmpfs_options": []any{map[string]any{"size": float64(1000)}}},
		},
	}
	if got := j.Groups[0].Tasks[0].Config; !reflect.DeepEqual(got, want) {
		t.Errorf("config =\n%#v\nwant\n%#v", got, want)
	}
}

func TestNomadSpellingsAreAccepted(t *testing.T) {
	j := mustParse(t, "nomad.nomad", `
job "j" {
  type = "system"
  meta = { a = "b" }
  constraint {
    attribute = "${attr.os.name}"
    operator  = "=="
    value     = "ubuntu"
  }
  constraint {
    attribute = "${attr.kernel.version}"
    version   = ">= 5.10, < 7"
  }
  constraint {
    attribute    = "${meta.roles}"
    set_contains = "web"
  }
  update {
    max_parallel = 1
    stagger      = "30s"
  }
  group "g" {
    task "t" {
      driver = "docker"
      env    = { PORT = 8080 }
      config = { image = "x" }
      constraint {
        attribute = "${attr.cpu.arch}"
        value     = "amd64"
      }
      service {
        provider = "nomad"
        port     = 8080
        check {
          type     = "tcp"
          interval = "10s"
          timeout  = "2s"
        }
      }
    }
  }
}`)
	wantCons := []model.Constraint{
		{Attribute: "${attr.os.name}", Operator: model.OpEqual, Value: "ubuntu"},
		{Attribute: "${attr.kernel.version}", Operator: model.OpVersion, Value: ">= 5.10, < 7"},
		{Attribute: "${meta.roles}", Operator: model.OpSetContains, Value: "web"},
	}
	if !reflect.DeepEqual(j.Constraints, wantCons) {
		t.Errorf("constraints = %+v, want %+v", j.Constraints, wantCons)
	}
	// A task's constraint restricts its group's node.
	wantGroup := []model.Constraint{{Attribute: "${attr.cpu.arch}", Operator: model.OpEqual, Value: "amd64"}}
	if !reflect.DeepEqual(j.Groups[0].Constraints, wantGroup) {
		t.Errorf("group constraints = %+v, want %+v", j.Groups[0].Constraints, wantGroup)
	}
	task := j.Groups[0].Tasks[0]
	if task.Env["PORT"] != "8080" || task.Services[0].Port != "8080" || j.Meta["a"] != "b" || task.Config["image"] != "x" {
		t.Errorf("attribute forms: env %v port %q meta %v config %v", task.Env, task.Services[0].Port, j.Meta, task.Config)
	}
}

func exampleFiles(t testing.TB) []string {
	files, err := filepath.Glob("../../examples/jobs/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("found %d example job files, want at least 6", len(files))
	}
	return files
}

func TestEveryExampleJobFileParses(t *testing.T) {
	kinds := map[string]bool{}
	for _, f := range exampleFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		j, err := Parse(f, data)
		if err != nil {
			t.Errorf("%s:\n%v", f, err)
			continue
		}
		kinds[string(j.Type)] = true
		kinds[filepath.Ext(f)] = true
		for _, g := range j.Groups {
			if g.Update != nil && g.Update.CanaryPolicy != nil {
				kinds["canary_policy"] = true
			}
			for _, task := range g.Tasks {
				kinds["driver:"+task.Driver] = true
				for _, s := range task.Services {
					for _, c := range s.Checks {
						kinds["check:"+string(c.Type)] = true
					}
				}
			}
		}
	}
	for _, k := range []string{"system", "sysbatch", ".hcl", ".json", "canary_policy", "driver:docker", "driver:exec", "driver:mock", "check:http", "check:tcp"} {
		if !kinds[k] {
			t.Errorf("no example covers %s", k)
		}
	}
}

func TestCanonicalJSONRoundTripsByteForByte(t *testing.T) {
	for _, f := range exampleFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		j, err := Parse(f, data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		first, err := Canonical(j)
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := model.DecodeJob(first)
		if err != nil {
			t.Fatalf("%s: canonical JSON does not decode: %v", f, err)
		}
		second, err := Canonical(decoded)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Errorf("%s: HCL → JSON → DecodeJob → JSON differs:\n%s\n---\n%s", f, first, second)
		}
		// The canonical JSON is itself a valid job file and parses to
		// the same job: ParseJSON's defaults change nothing on it.
		again, err := ParseJSON(f+".json", first)
		if err != nil {
			t.Fatalf("%s: canonical JSON does not parse as a job file: %v", f, err)
		}
		third, _ := Canonical(again)
		if !bytes.Equal(first, third) {
			t.Errorf("%s: canonical JSON → ParseJSON → JSON differs", f)
		}
	}
}

func TestJSONJobsGetTheSameDefaultsAsHCL(t *testing.T) {
	fromJSON, err := ParseJSON("j.json", []byte(`{"id":"j","type":"system",
		"update":{"max_parallel":2,"min_healthy_time":"5s","healthy_deadline":"1m","progress_deadline":"5m"},
		"groups":[{"name":"g","count":1,"network":{"ports":[{"label":"http"}]},"tasks":[{"name":"t","driver":"mock"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	fromHCL := mustParse(t, "j.hcl", `
job "j" {
  type = "system"
  update {
    max_parallel = 2
    min_healthy_time = "5s"
    healthy_deadline = "1m"
    progress_deadline = "5m"
  }
  group "g" {
    network {
      port "http" {}
    }
    task "t" { driver = "mock" }
  }
}`)
	a, _ := Canonical(fromJSON)
	b, _ := Canonical(fromHCL)
	if !bytes.Equal(a, b) {
		t.Errorf("JSON and HCL give different jobs:\n%s\n---\n%s", a, b)
	}
}

func TestParseChoosesTheSyntaxByExtension(t *testing.T) {
	hcl := `job "j" {
  type = "system"
  group "g" {
    task "t" { driver = "mock" }
  }
}`
	for _, name := range []string{"a.hcl", "a.nomad", "A.HCL"} {
		if _, err := Parse(name, []byte(hcl)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Parse("a.json", []byte(hcl)); err == nil {
		t.Error("HCL accepted as .json")
	}
	_, err := Parse("a.yaml", []byte(hcl))
	if err == nil || !strings.Contains(err.Error(), "unknown job file extension") {
		t.Errorf("a.yaml: got %v", err)
	}
}

func TestOversizeFilesAreRefused(t *testing.T) {
	big := make([]byte, MaxFileSize+1)
	for _, name := range []string{"big.hcl", "big.json"} {
		_, err := Parse(name, big)
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestJobFilesDocListsEveryUnsupportedStanza(t *testing.T) {
	doc, err := os.ReadFile("../../docs/job-files.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## Unsupported stanzas")
	if !ok {
		t.Fatal("docs/job-files.md has no Unsupported stanzas section")
	}
	n := 0
	for _, m := range []map[string]string{unsupported, unsupportedInGroup, unsupportedInTask, unsupportedInService, unsupportedInCheck, disconnectSpec.extra} {
		for name := range m {
			n++
			if !strings.Contains(table, "`"+name+"`") {
				t.Errorf("stanza %q is refused but not listed in docs/job-files.md", name)
			}
		}
	}
	if n < 40 {
		t.Fatalf("only %d unsupported stanzas seen", n)
	}
}

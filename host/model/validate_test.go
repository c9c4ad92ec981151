package model

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// validJob is a job every case below breaks in exactly one place.
func validJob() *Job {
	return &Job{
		ID:   "web",
		Type: JobTypeSystem,
		Constraints: []Constraint{
			{Attribute: "${attr.kernel.name}", Operator: OpEqual, Value: "linux"},
			{Attribute: "${attr.kernel.version}", Operator: OpVersion, Value: ">= 5.10, < 7"},
		},
		Update: DefaultUpdateStrategy(),
		Groups: []*Group{{
			Name:    "g",
			Count:   1,
			Update:  DefaultUpdateStrategy(),
			Restart: DefaultRestartPolicy(JobTypeSystem),
			Network: &Network{Mode: NetworkHost, Ports: []Port{{Label: "http", Static: 8080}, {Label: "admin"}}},
			Tasks: []*Task{{
				Name:   "t",
				Driver: "docker",
				Services: []Service{{Name: "web", Port: "http", Checks: []Check{
					{Type: CheckHTTP, Path: "/health", Interval: Duration(10 * time.Second), Timeout: Duration(2 * time.Second)},
				}}},
			}},
		}},
	}
}

func TestValidateReportsEachRuleAtTheFieldPath(t *testing.T) {
	cases := []struct {
		name     string
		mutate   func(j *Job)
		path     string
		contains string
	}{
		{"empty id", func(j *Job) { j.ID = "" }, "id", "must not be empty"},
		{"id with space", func(j *Job) { j.ID = "a b" }, "id", "NATS key"},
		{"missing type", func(j *Job) { j.Type = "" }, "type", "job type is missing"},
		{"service type", func(j *Job) { j.Type = "service" }, "type", "no central scheduler"},
		{"priority", func(j *Job) { j.Priority = 101 }, "priority", "between 1 and 100"},
		{"empty datacenter", func(j *Job) { j.Datacenters = []string{"dc1", " "} }, "datacenters[1]", "must not be empty"},
		{"no groups", func(j *Job) { j.Groups = nil }, "groups", "at least one group"},
		{"unknown network mode", func(j *Job) { j.Groups[0].Network.Mode = "cni/x" }, "groups[0].network.mode", "not supported"},
		{"bridge network with two tasks", func(j *Job) {
			j.Groups[0].Network.Mode = NetworkBridge
			j.Groups[0].Tasks = append(j.Groups[0].Tasks, &Task{Name: "u", Driver: "docker"})
		}, "groups[0].network.mode", "takes a group of one task"},
		{"bridge network with exec", func(j *Job) {
			j.Groups[0].Network.Mode = NetworkBridge
			j.Groups[0].Tasks[0].Driver = "exec"
		}, "groups[0].network.mode", "needs the docker driver"},
		{"port label with a dot", func(j *Job) { j.Groups[0].Network.Ports[1].Label = "ad.min" }, "groups[0].network.ports[1].label", "NOMAD_PORT_"},
		{"duplicate port label", func(j *Job) { j.Groups[0].Network.Ports[1].Label = "http" }, "groups[0].network.ports[1].label", "duplicate port label"},
		{"static port twice", func(j *Job) { j.Groups[0].Network.Ports[1].Static = 8080 }, "groups[0].network.ports[1].static", "already taken by label \"http\""},
		{"static port out of range", func(j *Job) { j.Groups[0].Network.Ports[1].Static = 70000 }, "groups[0].network.ports[1].static", "out of 1..65535"},
		{"to out of range", func(j *Job) { j.Groups[0].Network.Ports[1].To = -1 }, "groups[0].network.ports[1].to", "out of 1..65535"},
		{"service port label not in the network", func(j *Job) { j.Groups[0].Network = nil }, "groups[0].tasks[0].services[0].port", "not a port label"},
		{"max_run_duration on a system job", func(j *Job) { j.Groups[0].MaxRunDuration = Duration(time.Minute) }, "groups[0].max_run_duration", "sysbatch jobs only"},
		{"duplicate group", func(j *Job) { g := *j.Groups[0]; j.Groups = append(j.Groups, &g) }, "groups[1].name", "duplicate group name"},
		{"negative count", func(j *Job) { j.Groups[0].Count = -1 }, "groups[0].count", "0 or more"},
		{"canary over 100", func(j *Job) { j.Groups[0].Update.Canary = 101 }, "groups[0].update.canary", "between 0 and 100"},
		{"canary below 0", func(j *Job) { j.Update.Canary = -1 }, "update.canary", "between 0 and 100"},
		{"canary without deployment", func(j *Job) { j.Groups[0].Update.Canary = 10; j.Groups[0].Update.MaxParallel = 0 }, "groups[0].update.canary", "max_parallel > 0"},
		{"negative max_parallel", func(j *Job) { j.Groups[0].Update.MaxParallel = -1 }, "groups[0].update.max_parallel", "0 or more"},
		{"min healthy = healthy deadline", func(j *Job) { j.Groups[0].Update.MinHealthyTime = j.Groups[0].Update.HealthyDeadline }, "groups[0].update.min_healthy_time", "shorter than healthy_deadline"},
		{"healthy deadline > progress", func(j *Job) { j.Groups[0].Update.HealthyDeadline = Duration(time.Hour) }, "groups[0].update.healthy_deadline", "shorter than progress_deadline"},
		{"health_check", func(j *Job) { j.Groups[0].Update.HealthCheck = "vibes" }, "groups[0].update.health_check", "unknown health_check"},
		{"policy digest", func(j *Job) { j.Groups[0].Update.CompletionPolicy = &PolicyRef{Name: "q", Digest: "md5:x"} }, "groups[0].update.completion_policy.digest", "64 lowercase hex"},
		{"policy name", func(j *Job) { j.Groups[0].Update.CanaryPolicy = &PolicyRef{} }, "groups[0].update.canary_policy.name", "must not be empty"},
		{"sysbatch group update", func(j *Job) { j.Type = JobTypeSysbatch; j.Update = nil }, "groups[0].update", "sysbatch jobs take no update block"},
		{"sysbatch job update", func(j *Job) { j.Type = JobTypeSysbatch; j.Groups[0].Update = nil }, "update", "sysbatch jobs take no update block"},
		{"restart mode", func(j *Job) { j.Groups[0].Restart.Mode = "retry" }, "groups[0].restart.mode", "unknown restart mode"},
		{"restart attempts don't fit", func(j *Job) { j.Groups[0].Restart.Attempts = 1000 }, "groups[0].restart.interval", "attempts × delay"},
		{"disconnect reconcile", func(j *Job) { j.Groups[0].Disconnect = &DisconnectStrategy{Reconcile: "coin"} }, "groups[0].disconnect.reconcile", "unknown reconcile mode"},
		{"no tasks", func(j *Job) { j.Groups[0].Tasks = nil }, "groups[0].tasks", "at least one task"},
		{"missing driver", func(j *Job) { j.Groups[0].Tasks[0].Driver = "" }, "groups[0].tasks[0].driver", "needs a driver"},
		{"duplicate task", func(j *Job) { j.Groups[0].Tasks = append(j.Groups[0].Tasks, &Task{Name: "t", Driver: "x"}) }, "groups[0].tasks[1].name", "duplicate task name"},
		{"negative memory", func(j *Job) { j.Groups[0].Tasks[0].Resources.MemoryMB = -1 }, "groups[0].tasks[0].resources.memory_mb", "0 or more MiB"},
		{"env name", func(j *Job) { j.Groups[0].Tasks[0].Env = map[string]string{"A=B": "x"} }, "groups[0].tasks[0].env", "no '='"},
		{"check type", func(j *Job) { j.Groups[0].Tasks[0].Services[0].Checks[0].Type = "grpc" }, "groups[0].tasks[0].services[0].checks[0].type", "not supported"},
		{"http check path", func(j *Job) { j.Groups[0].Tasks[0].Services[0].Checks[0].Path = "" }, "groups[0].tasks[0].services[0].checks[0].path", "needs a path"},
		{"check port", func(j *Job) { j.Groups[0].Tasks[0].Services[0].Port = "" }, "groups[0].tasks[0].services[0].checks[0].port", "needs a port"},
		{"check timeout", func(j *Job) { j.Groups[0].Tasks[0].Services[0].Checks[0].Timeout = Duration(time.Minute) }, "groups[0].tasks[0].services[0].checks[0].timeout", "longer than its interval"},
		{"distinct_hosts", func(j *Job) { j.Constraints[0].Operator = "distinct_hosts" }, "constraints[0].operator", "at most once per node"},
		{"bad operator", func(j *Job) { j.Constraints[0].Operator = "~" }, "constraints[0].operator", "unknown constraint operator"},
		{"constraint attribute", func(j *Job) { j.Constraints[0].Attribute = "" }, "constraints[0].attribute", "needs an attribute"},
		{"bad version", func(j *Job) { j.Constraints[1].Value = "five" }, "constraints[1].value", "bad version constraint"},
		{"pessimistic version", func(j *Job) { j.Constraints[1].Value = "~> 1.2" }, "constraints[1].value", "bad version constraint"},
		{"bad regexp", func(j *Job) { j.Constraints[0] = Constraint{Attribute: "x", Operator: OpRegexp, Value: "("} }, "constraints[0].value", "bad regular expression"},
	}
	if err := validJob().Validate(); err != nil {
		t.Fatalf("control: the valid job fails: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := validJob()
			c.mutate(j)
			err := j.Validate()
			var ves ValidationErrors
			if !errors.As(err, &ves) {
				t.Fatalf("want ValidationErrors, got %v", err)
			}
			for _, e := range ves {
				if e.Path == c.path && strings.Contains(e.Message, c.contains) {
					return
				}
			}
			t.Fatalf("no error at %s containing %q; got:\n%v", c.path, c.contains, err)
		})
	}
}

func TestValidateReportsEveryProblemNotOnlyTheFirst(t *testing.T) {
	j := validJob()
	j.ID = ""
	j.Groups[0].Count = -1
	j.Groups[0].Tasks[0].Driver = ""
	err := j.Validate()
	var ves ValidationErrors
	if !errors.As(err, &ves) || len(ves) != 3 {
		t.Fatalf("want 3 errors, got %v", err)
	}
}

func TestInterpolatedConstraintValuesAreLeftToTheNode(t *testing.T) {
	j := validJob()
	j.Constraints[0] = Constraint{Attribute: "${attr.x}", Operator: OpRegexp, Value: "${meta.pattern}("}
	j.Constraints[1].Value = "${meta.min_version}"
	if err := j.Validate(); err != nil {
		t.Fatalf("interpolated values refused: %v", err)
	}
	// Control: the same regexp without interpolation is checked.
	j.Constraints[0].Value = "x("
	if err := j.Validate(); err == nil {
		t.Fatal("bad literal regexp accepted")
	}
}

// TestAPortLabelMayHoldADashUnlessItMeetsAnotherInTheEnvironment: Nomad's
// labels such as "jaeger-thrift" are valid (the environment writes the '-'
// as '_'), and a service may name one; two labels that come out as the same
// variable ("a-b" and "a_b") are refused at the second, naming both.
func TestAPortLabelMayHoldADashUnlessItMeetsAnotherInTheEnvironment(t *testing.T) {
	j := validJob()
	j.Groups[0].Network.Ports = append(j.Groups[0].Network.Ports, Port{Label: "jaeger-thrift", Static: 6831})
	j.Groups[0].Tasks[0].Services[0].Port = "jaeger-thrift"
	if err := j.Validate(); err != nil {
		t.Fatalf("a label with a dash: %v", err)
	}
	j.Groups[0].Network.Ports = append(j.Groups[0].Network.Ports, Port{Label: "jaeger_thrift"})
	err := j.Validate()
	want := `groups[0].network.ports[3].label: port labels "jaeger-thrift" and "jaeger_thrift" are the same variable NOMAD_PORT_jaeger_thrift in the task's environment ('-' is written '_'): rename one`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("two labels, one variable: %v\nwant %s", err, want)
	}
}

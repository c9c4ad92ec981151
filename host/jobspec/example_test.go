package jobspec_test

import (
	"fmt"
	"os"

	"github.com/hivelet/hivelet/host/jobspec"
)

// A job-level update block is inherited by each group and overridden field
// by field; "${...}" interpolations stay as text for the node.
func ExampleParse() {
	src := `
job "web" {
  type = "system"
  update {
    max_parallel     = 2
    min_healthy_time = "30s"
  }
  group "web" {
    update { max_parallel = 4 }
    task "server" {
      driver = "docker"
      env { DC = "${node.datacenter}" }
    }
  }
}`
	job, err := jobspec.Parse("web.hcl", []byte(src))
	if err != nil {
		fmt.Println(err)
		return
	}
	u := job.Groups[0].Update
	fmt.Println(u.MaxParallel, u.MinHealthyTime, u.HealthyDeadline)
	fmt.Println(job.Groups[0].Tasks[0].Env["DC"])
	// Output:
	// 4 30s 5m0s
	// ${node.datacenter}
}

// Every problem is reported with its position.
func ExampleParse_errors() {
	src := `
job "web" {
  type = "service"
  group "web" {
    count = -1
    task "server" {
      driver = "docker"
      vault { policies = ["x"] }
    }
  }
}`
	_, err := jobspec.Parse("web.hcl", []byte(src))
	fmt.Println(err)
	// Output:
	// web.hcl:3:10: job type "service" is not supported: hivelet has no central scheduler, so it runs only node-bound job types (system, sysbatch)
	// web.hcl:5:13: count must be 0 or more, got -1
	// web.hcl:8:7: stanza "vault" is not supported by hivelet (hivelet has no Vault integration; pass secrets through env or the driver config)
}

// Canonical JSON is what `hivelet job inspect` prints and the jobs bucket stores.
func ExampleCanonical() {
	job, err := jobspec.Parse("batch.hcl", []byte(`
job "sweep" {
  type = "sysbatch"
  group "g" {
    task "t" { driver = "exec" }
  }
}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := jobspec.Canonical(job)
	os.Stdout.Write(out)
	// Output:
	// {
	//   "id": "sweep",
	//   "type": "sysbatch",
	//   "version": 0,
	//   "groups": [
	//     {
	//       "name": "g",
	//       "count": 1,
	//       "restart": {
	//         "attempts": 3,
	//         "interval": "24h0m0s",
	//         "delay": "15s",
	//         "mode": "fail"
	//       },
	//       "tasks": [
	//         {
	//           "name": "t",
	//           "driver": "exec"
	//         }
	//       ]
	//     }
	//   ]
	// }
}

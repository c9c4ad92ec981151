# shape: a one-shot sysbatch that prunes docker on every node through raw_exec, bounded
#        by max_run_duration (runs on agents with raw_exec { enabled = true }, as in Nomad)
# verdict: runs
job "docker-prune" {
  type = "sysbatch"

  group "prune" {
    max_run_duration = "30m"

    task "prune" {
      driver = "raw_exec"

      config {
        command = "docker"
        args    = ["system", "prune", "--force"]
      }
    }
  }
}

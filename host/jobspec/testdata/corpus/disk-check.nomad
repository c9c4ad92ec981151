# shape: a sysbatch health sweep of every node with the exec driver and a time limit
# verdict: runs
job "disk-check" {
  datacenters = ["*"]
  type        = "sysbatch"

  group "check" {
    max_run_duration = "5m"

    restart {
      attempts = 1
      delay    = "10s"
    }

    task "df" {
      driver = "exec"

      config {
        command = "/bin/df"
        args    = ["-h", "/"]
      }
    }
  }
}

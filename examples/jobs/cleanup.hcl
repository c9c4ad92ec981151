# A sysbatch job: runs once to completion on every matching node.
# sysbatch jobs take no update block.
job "cleanup-tmp" {
  type        = "sysbatch"
  datacenters = ["dc1"]

  constraint {
    attribute = "${meta.role}"
    operator  = "set_contains"
    value     = "worker"
  }

  group "cleanup" {
    restart {
      attempts = 1
      mode     = "fail"
    }

    task "sweep" {
      driver = "exec"

      config {
        command = "/usr/bin/find"
        args    = ["/tmp", "-mtime", "+7", "-delete"]
      }

      kill_timeout = "5s"
    }
  }
}

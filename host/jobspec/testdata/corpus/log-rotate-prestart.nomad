# shape: a node agent with a prestart task preparing its directory (lifecycle hooks)
# verdict: runs
job "agent-with-init" {
  type = "system"

  group "g" {
    task "init" {
      driver = "exec"

      lifecycle {
        hook    = "prestart"
        sidecar = false
      }

      config {
        command = "/bin/mkdir"
        args    = ["-p", "/var/lib/agent"]
      }
    }

    task "agent" {
      driver = "exec"
      config {
        command = "/usr/local/bin/agent"
      }
    }
  }
}

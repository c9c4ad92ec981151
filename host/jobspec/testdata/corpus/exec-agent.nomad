# shape: a host agent run by the exec driver from a binary already on the node, with a
#        static port and a TCP check
# verdict: runs
job "host-agent" {
  type = "system"

  group "agent" {
    network {
      port "rpc" {
        static = 7946
      }
    }

    service {
      name = "host-agent"
      port = "rpc"

      check {
        type     = "tcp"
        interval = "15s"
        timeout  = "3s"
      }
    }

    task "agent" {
      driver = "exec"

      config {
        command = "/usr/local/bin/host-agent"
        args    = ["-bind", "${NOMAD_ADDR_rpc}"]
      }
    }
  }
}

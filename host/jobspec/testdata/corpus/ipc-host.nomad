# shape: a shared-memory metrics agent that needs the host IPC namespace and a
#        dynamic port reported through env
# verdict: runs
job "shm-agent" {
  type = "system"

  group "agent" {
    network {
      port "stats" {}
    }

    task "agent" {
      driver = "docker"

      config {
        image    = "example/shm-agent:2"
        ipc_mode = "host"
        ports    = ["stats"]
      }

      env {
        LISTEN = "${NOMAD_IP_stats}:${NOMAD_PORT_stats}"
      }
    }
  }
}

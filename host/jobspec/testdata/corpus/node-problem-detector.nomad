# shape: a per-node problem detector pinned to Linux nodes, with job meta, a rolling
#        update and the kernel log device
# verdict: runs
job "node-problem-detector" {
  type     = "system"
  priority = 80

  meta {
    owner = "platform"
  }

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  update {
    max_parallel     = 1
    min_healthy_time = "15s"
    healthy_deadline = "5m"
    auto_revert      = true
    stagger          = "30s"
  }

  group "npd" {
    network {
      port "http" {
        to = 20256
      }
    }

    task "npd" {
      driver = "docker"

      config {
        image   = "registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.19"
        ports   = ["http"]
        devices = [{ host_path = "/dev/kmsg", cgroup_permissions = "r" }]
        args    = ["--address=0.0.0.0", "--port=${NOMAD_PORT_http}"]
      }
    }
  }
}

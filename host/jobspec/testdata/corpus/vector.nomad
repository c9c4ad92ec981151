# shape: a Vector/Fluent Bit log agent with a dynamic API port mapped into the container,
#        the docker socket mounted and node identity passed through env
# verdict: runs
job "vector" {
  type = "system"

  update {
    max_parallel     = 2
    min_healthy_time = "10s"
    healthy_deadline = "3m"
  }

  group "vector" {
    network {
      port "api" {
        to = 8686
      }
    }

    service {
      name = "vector"
      port = "api"
      tags = []

      check {
        type     = "http"
        path     = "/health"
        interval = "30s"
        timeout  = "5s"
      }
    }

    task "vector" {
      driver = "docker"

      config {
        image   = "timberio/vector:0.40.0-alpine"
        ports   = ["api"]
        volumes = ["/var/run/docker.sock:/var/run/docker.sock:ro"]
      }

      env {
        VECTOR_CONFIG = "/etc/vector/vector.toml"
        NODE_NAME     = "${node.unique.name}"
        NODE_DC       = "${node.datacenter}"
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}

# A canary rollout: 10% of the ready nodes (rounded up) get the new version
# first, chosen by the "spread" canary policy across datacenters; the
# deployment completes once a quorum of allocations is healthy, as judged by
# the "quorum" completion policy.
job "api" {
  type        = "system"
  datacenters = ["dc1", "dc2", "dc3"]

  constraint {
    attribute = "${attr.driver.docker.version}"
    version   = ">= 24.0"
  }

  update {
    max_parallel      = 3
    canary            = 10
    auto_promote      = true
    auto_revert       = true
    min_healthy_time  = "30s"
    healthy_deadline  = "5m"
    progress_deadline = "15m"

    canary_policy "spread" {
      attribute = "${node.datacenter}"
    }

    completion_policy "quorum" {
      digest = "sha256:3b7d1c2f5e8a9b0c4d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
      ratio  = 0.9
    }
  }

  group "api" {
    # The group overrides one field; the rest is inherited from the job.
    update {
      max_parallel = 5
    }

    task "api" {
      driver = "docker"

      config {
        image = "hivelet/api:local"

        ports {
          host      = 9000
          container = 9000
        }
      }

      service {
        name = "api"
        port = "9000"

        check {
          type     = "http"
          path     = "/ready"
          interval = "5s"
          timeout  = "1s"
        }
      }
    }
  }

  group "migrations-watch" {
    update {
      canary       = 0
      auto_promote = false
    }

    task "watch" {
      driver = "mock"
    }
  }
}

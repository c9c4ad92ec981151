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

    # A pushed module can be pinned: digest = "sha256:<hex>" (see
    # `hivelet policy inspect` and `hivelet policy push`). A built-in is
    # named without one.
    completion_policy "quorum" {
      ratio = 0.9
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

        publish {
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

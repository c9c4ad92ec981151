# A web server on every node of dc1 and dc2, in a Docker container built
# locally (FROM scratch + a static Go binary; no registry is needed).
job "web" {
  type        = "system"
  datacenters = ["dc1", "dc2"]
  node_pool   = "default"
  priority    = 60

  meta {
    team = "edge"
  }

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  update {
    max_parallel     = 2
    min_healthy_time = "10s"
    healthy_deadline = "3m"
    auto_revert      = true
    stagger          = "30s" # accepted, ignored: see docs/job-files.md
  }

  group "web" {
    count = 1

    # The port the group holds on each node: static 8080, published on the
    # agent's network.address (127.0.0.1 in dev mode).
    network {
      port "http" {
        static = 8080
      }
    }

    restart {
      attempts = 3
      interval = "10m"
      delay    = "15s"
      mode     = "delay"
    }

    task "server" {
      driver = "docker"

      config {
        image = "hivelet/web:local"
        args  = ["-listen", ":${NOMAD_PORT_http}", "-node", "${node.unique.name}", "-static", "/local/static"]

        # Publish the group's "http" port into the container.
        ports = ["http"]
      }

      # Rendered into the task directory before the task starts; the
      # container sees it under /local (served as /static/index.txt).
      template {
        destination = "local/static/index.txt"
        data        = "hello from {{ env \"node.unique.name\" }}, port {{ env \"NOMAD_HOST_PORT_http\" }}\n"
        change_mode = "noop"
      }

      env {
        DATACENTER = "${node.datacenter}"
        LOG_LEVEL  = "info"
      }

      resources {
        cpu    = 200
        memory = 128
      }

      kill_timeout = "20s"
      kill_signal  = "SIGTERM"

      service {
        name     = "web"
        port     = "http" # a port label, a number (loopback) or "host:port"
        provider = "nomad" # accepted and ignored: the agent runs the checks

        check {
          name     = "alive"
          type     = "http"
          path     = "/health"
          interval = "10s"
          timeout  = "2s"
        }
      }
    }
  }
}

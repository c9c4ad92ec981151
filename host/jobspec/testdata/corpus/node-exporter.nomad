# shape: Prometheus node_exporter as a docker system job with the host's root mounted
#        read-only and the host PID namespace (the monitoring examples Nomad users share)
# verdict: runs
job "node-exporter" {
  datacenters = ["dc1"]
  type        = "system"

  group "node-exporter" {
    network {
      port "metrics" {
        static = 9100
      }
    }

    service {
      name     = "node-exporter"
      port     = "metrics"
      provider = "nomad"
      tags     = ["prometheus", "metrics"]

      check {
        type     = "http"
        path     = "/metrics"
        interval = "10s"
        timeout  = "2s"
      }
    }

    task "node-exporter" {
      driver = "docker"

      config {
        image        = "prom/node-exporter:v1.8.2"
        ports        = ["metrics"]
        pid_mode     = "host"
        args         = ["--path.rootfs=/host", "--web.listen-address=:${NOMAD_PORT_metrics}"]
        volumes      = ["/:/host:ro,rslave"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}

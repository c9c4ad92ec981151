# A metrics exporter run as a plain process by the exec driver, on every
# Linux node, on the static port 9100 (the group's network), with a tcp
# check on that port label and its service registered while it passes.
job "node-exporter" {
  type        = "system"
  datacenters = ["*"]

  group "exporter" {
    network {
      port "metrics" {
        static = 9100
      }
    }

    disconnect {
      lost_after = "5m"
      replace    = false
      reconcile  = "keep_original"
    }

    task "exporter" {
      driver = "exec"
      user   = "nobody"

      config {
        command = "/usr/local/bin/node_exporter"
        args    = ["--web.listen-address=${NOMAD_ADDR_metrics}", "--collector.textfile.directory=${NOMAD_ALLOC_DIR}/textfile"]
      }

      resources {
        cpu    = 100
        memory = 64
      }

      service {
        name = "node-exporter"
        port = "metrics"
        tags = ["prometheus"]

        check {
          type     = "tcp"
          interval = "15s"
          timeout  = "3s"
        }
      }
    }
  }
}

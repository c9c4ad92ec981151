# A metrics exporter run as a plain process by the exec driver, on every
# Linux node, with a tcp check.
job "node-exporter" {
  type        = "system"
  datacenters = ["*"]

  group "exporter" {
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
        args    = ["--web.listen-address=:9100", "--collector.textfile.directory=${NOMAD_ALLOC_DIR}/textfile"]
      }

      resources {
        cpu    = 100
        memory = 64
      }

      service {
        name = "node-exporter"
        port = "9100"

        check {
          type     = "tcp"
          interval = "15s"
          timeout  = "3s"
        }
      }
    }
  }
}

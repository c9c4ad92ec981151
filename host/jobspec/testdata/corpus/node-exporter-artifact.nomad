# shape: node_exporter run by the exec driver from a release tarball fetched with an
#        artifact block (the no-docker variant of the monitoring examples)
# verdict: runs
job "node-exporter" {
  type = "system"

  group "node-exporter" {
    network {
      port "metrics" {
        static = 9100
      }
    }

    task "node-exporter" {
      driver = "exec"

      artifact {
        source = "https://example.invalid/node_exporter-1.8.2.linux-amd64.tar.gz"
      }

      config {
        command = "local/node_exporter-1.8.2.linux-amd64/node_exporter"
      }
    }
  }
}

# shape: a GPU metrics exporter asking the scheduler for a GPU through a device block
# verdict: refused
# want: stanza "device" is not supported by hivelet
job "gpu-exporter" {
  type = "system"

  group "exporter" {
    task "exporter" {
      driver = "docker"

      config {
        image = "nvidia/dcgm-exporter:3.3.5"
      }

      resources {
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}

# shape: cAdvisor with the host's /, /sys, /var/run and docker's data directory mounted
#        and /dev/kmsg passed in (the container-metrics examples)
# verdict: driver
# want: "privileged" needs docker.allow_privileged on the node
job "cadvisor" {
  type = "system"

  group "cadvisor" {
    network {
      port "http" {
        static = 8080
      }
    }

    task "cadvisor" {
      driver = "docker"

      config {
        image      = "gcr.io/cadvisor/cadvisor:v0.49.1"
        ports      = ["http"]
        privileged = true
        devices = [
          {
            host_path = "/dev/kmsg"
          }
        ]
        volumes = [
          "/:/rootfs:ro",
          "/var/run:/var/run:ro",
          "/sys:/sys:ro",
          "/var/lib/docker/:/var/lib/docker:ro",
        ]
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}

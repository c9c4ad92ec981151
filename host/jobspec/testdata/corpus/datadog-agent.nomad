# shape: a Datadog-style metrics agent: the API key as a sensitive variable, the docker
#        socket, /proc and the cgroup tree mounted, DogStatsD on a static UDP/TCP port
# verdict: runs
# vars: api_key=0123456789abcdef
variable "api_key" {
  type      = string
  sensitive = true
}

job "datadog-agent" {
  datacenters = ["dc1"]
  type        = "system"

  group "agent" {
    network {
      port "dogstatsd" {
        static = 8125
      }
    }

    task "agent" {
      driver = "docker"

      config {
        image = "datadog/agent:7"
        ports = ["dogstatsd"]
        volumes = [
          "/var/run/docker.sock:/var/run/docker.sock:ro",
          "/proc/:/host/proc/:ro",
          "/sys/fs/cgroup/:/host/sys/fs/cgroup:ro",
        ]
      }

      env {
        DD_API_KEY              = var.api_key
        DD_HOSTNAME             = "${node.unique.name}"
        DD_DOGSTATSD_NON_LOCAL_TRAFFIC = "true"
      }

      resources {
        cpu    = 200
        memory = 256
      }
    }
  }
}

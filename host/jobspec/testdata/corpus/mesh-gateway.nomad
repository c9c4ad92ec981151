# shape: a job on the service mesh: bridge networking and a Connect sidecar
# verdict: refused
# want: network mode "bridge" is not supported by hivelet
job "mesh-edge" {
  type = "system"

  group "edge" {
    network {
      mode = "bridge"
      port "http" {
        static = 8080
        to     = 8080
      }
    }

    task "edge" {
      driver = "docker"
      config {
        image = "example/edge:1"
      }
    }
  }
}

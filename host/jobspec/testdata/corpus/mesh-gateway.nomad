# shape: a job on the service mesh's edge: bridge networking, its port mapped into the task
# verdict: runs
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

# shape: a docker image garbage collector run once on every node, with Nomad's logs block
#        for its output (accepted, with a warning: the driver rotates by its own settings)
# verdict: runs
job "docker-gc" {
  type = "sysbatch"

  group "gc" {
    max_run_duration = "20m"

    task "gc" {
      driver = "docker"

      config {
        image   = "spotify/docker-gc:latest"
        volumes = ["/var/run/docker.sock:/var/run/docker.sock"]
      }

      env {
        GRACE_PERIOD_SECONDS = "86400"
      }

      logs {
        max_files     = 2
        max_file_size = 5
      }
    }
  }
}

# shape: a system job carrying service-job boilerplate: an ephemeral_disk block
#        (accepted with a warning: no disk is reserved)
# verdict: runs
job "cache-warmer" {
  type = "system"

  group "warmer" {
    ephemeral_disk {
      size = 300
    }

    task "warmer" {
      driver = "docker"
      config {
        image = "example/cache-warmer:1"
      }
    }
  }
}

# shape: a system job carrying service-job boilerplate: an ephemeral_disk block
# verdict: refused
# want: stanza "ephemeral_disk" is not supported by hivelet
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

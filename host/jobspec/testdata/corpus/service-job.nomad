# shape: a web service written as a Nomad service job (no type: Nomad's default)
# verdict: refused
# want: job type is missing
job "web" {
  group "web" {
    count = 3

    task "web" {
      driver = "docker"
      config {
        image = "example/web:1"
      }
    }
  }
}

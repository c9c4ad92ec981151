# shape: a job reading its secrets through a template with env = true (the
#        configuration-from-KV examples)
#        (the variable is written with `hivelet var put nomad/jobs/app password=...`)
# verdict: runs
job "app" {
  type = "system"

  group "app" {
    task "app" {
      driver = "docker"

      config {
        image = "example/app:1"
      }

      template {
        data        = "DB_PASSWORD={{ with nomadVar \"nomad/jobs/app\" }}{{ .password }}{{ end }}"
        destination = "secrets/app.env"
        env         = true
      }
    }
  }
}

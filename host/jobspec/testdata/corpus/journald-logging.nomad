# shape: a docker task sending its output to journald through docker's logging options
# verdict: runs
#          (the engine must have its journald log driver: Docker on Linux does)
job "journal" {
  type = "system"

  group "g" {
    task "app" {
      driver = "docker"

      config {
        image = "example/app:1"
        logging {
          type = "journald"
          config {
            tag = "app"
          }
        }
      }
    }
  }
}

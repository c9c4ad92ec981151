# shape: a Promtail/Grafana Agent log shipper whose config file is rendered by a template
#        block and which tails /var/log and the docker containers' logs
# verdict: runs
job "promtail" {
  datacenters = ["dc1"]
  type        = "system"

  group "promtail" {
    network {
      port "http" {
        static = 9080
      }
    }

    task "promtail" {
      driver = "docker"

      config {
        image   = "grafana/promtail:2.9.0"
        ports   = ["http"]
        args    = ["-config.file=/local/promtail.yml"]
        volumes = ["/var/log:/var/log:ro", "/var/lib/docker/containers:/var/lib/docker/containers:ro"]
      }

      template {
        destination = "local/promtail.yml"
        data        = <<EOT
server:
  http_listen_port: {{ env "NOMAD_PORT_http" }}
EOT
      }
    }
  }
}

# shape: an OpenTelemetry collector per node: OTLP gRPC and HTTP on static ports, a
#        dynamic health port, its config rendered by a template from the ports
# verdict: runs
job "otel-agent" {
  type = "system"

  group "otel" {
    network {
      port "grpc" {
        static = 4317
      }
      port "http" {
        static = 4318
      }
      port "health" {
        to = 13133
      }
    }

    service {
      name = "otel-agent"
      port = "grpc"
      tags = ["otlp"]

      check {
        type     = "http"
        port     = "health"
        path     = "/"
        interval = "15s"
        timeout  = "3s"
      }
    }

    task "collector" {
      driver = "docker"

      config {
        image = "otel/opentelemetry-collector-contrib:0.108.0"
        ports = ["grpc", "http", "health"]
        args  = ["--config=/local/otel.yaml"]
      }

      template {
        destination = "local/otel.yaml"
        change_mode = "restart"
        data        = <<EOT
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 0.0.0.0:{{ env "NOMAD_PORT_grpc" }}
      http:
        endpoint: 0.0.0.0:{{ env "NOMAD_PORT_http" }}
extensions:
  health_check:
    endpoint: 0.0.0.0:13133
processors:
  resource:
    attributes:
      - key: host.name
        value: {{ env "node.unique.name" }}
        action: upsert
EOT
      }

      resources {
        cpu    = 300
        memory = 256
      }
    }
  }
}

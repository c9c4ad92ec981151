# shape: a metrics shipper written for a Consul cluster: a group consul block, a service
#        with meta and check_restart, a task-level restart block, a "true" given as text for
#        a bool, and a template that finds InfluxDB through Consul's service function
# verdict: driver
# want: "privileged" needs docker.allow_privileged on the node
job "influx-shipper" {
  datacenters = ["*"]
  type        = "system"

  group "shipper" {
    consul {
      namespace = "metrics"
    }

    network {
      port "health" {
        static = 9273
      }
    }

    task "shipper" {
      driver = "docker"

      restart {
        attempts = 5
        delay    = "10s"
        mode     = "delay"
      }

      config {
        image      = "telegraf:1.31"
        privileged = "true"
        ports      = ["health"]
        volumes    = ["local/telegraf.conf:/etc/telegraf/telegraf.conf:ro"]
      }

      service {
        name = "influx-shipper"
        port = "health"

        meta {
          metrics_path = "/metrics"
        }

        check_restart {
          limit = 3
          grace = "30s"
        }

        check {
          type     = "http"
          path     = "/metrics"
          interval = "10s"
          timeout  = "2s"
        }
      }

      template {
        destination   = "local/telegraf.conf"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        data          = <<EOF
[[outputs.influxdb]]
  urls = [{{ range service "primary.influxdb" }}"http://{{ .Address }}:{{ .Port }}",{{ end }}]
[[outputs.prometheus_client]]
  listen = ":{{ env "NOMAD_PORT_health" }}"
EOF
      }
    }
  }
}

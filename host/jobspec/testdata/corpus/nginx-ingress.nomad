# shape: an nginx ingress whose upstreams are rendered by a template from the service
#        catalog (the load-balancing examples)
#        (re-rendered, and nginx signalled, when an instance registers or goes)
# verdict: runs
job "nginx" {
  type = "system"

  group "nginx" {
    network {
      port "http" {
        static = 80
      }
    }

    task "nginx" {
      driver = "docker"

      config {
        image   = "nginx:1.27"
        ports   = ["http"]
        volumes = ["local:/etc/nginx/conf.d"]
      }

      template {
        data          = "upstream backend { {{ range nomadService \"web\" }} server {{ .Address }}:{{ .Port }}; {{ end }} }"
        destination   = "local/load-balancer.conf"
        change_mode   = "signal"
        change_signal = "SIGHUP"
      }
    }
  }
}

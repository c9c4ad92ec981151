# shape: a Traefik ingress on every node: static 80/443 ports, the host network, the
#        Nomad provider pointed at the local agent, service tags for its own router
# verdict: runs
job "traefik" {
  region      = "global"
  datacenters = ["dc1"]
  type        = "system"

  group "traefik" {
    network {
      port "http" {
        static = 80
      }
      port "https" {
        static = 443
      }
      port "api" {
        static = 8081
      }
    }

    service {
      name     = "traefik"
      provider = "nomad"
      port     = "api"
      tags     = ["traefik.enable=true", "traefik.http.routers.dashboard.rule=Host(`traefik.local`)"]

      check {
        name     = "alive"
        type     = "tcp"
        port     = "http"
        interval = "10s"
        timeout  = "2s"
      }
    }

    task "traefik" {
      driver = "docker"

      config {
        image        = "traefik:v3.1"
        network_mode = "host"
        ports        = ["http", "https", "api"]
        args = [
          "--entrypoints.web.address=:${NOMAD_PORT_http}",
          "--entrypoints.websecure.address=:${NOMAD_PORT_https}",
          "--entrypoints.traefik.address=:${NOMAD_PORT_api}",
          "--api.dashboard=true",
          "--providers.nomad.endpoint.address=http://${attr.unique.network.ip-address}:4646",
        ]
      }

      resources {
        cpu    = 200
        memory = 128
      }
    }
  }
}

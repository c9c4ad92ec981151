# shape: a keepalived virtual-IP holder on the host network (ingress high availability)
# verdict: driver
# want: "net_admin" needs docker.allow_caps
job "keepalived" {
  type = "system"

  constraint {
    attribute = "${meta.ingress}"
    value     = "true"
  }

  group "vip" {
    task "keepalived" {
      driver = "docker"

      config {
        image        = "osixia/keepalived:2.0.20"
        network_mode = "host"
        cap_add      = ["NET_ADMIN", "NET_BROADCAST", "NET_RAW"]
      }

      env {
        KEEPALIVED_VIRTUAL_IPS = "10.0.0.100"
        KEEPALIVED_PRIORITY    = "${meta.vip_priority}"
      }
    }
  }
}

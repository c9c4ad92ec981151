# shape: a Tailscale/WireGuard-style VPN node agent on the host network with NET_ADMIN and
#        the tun device (the homelab repositories' subnet routers)
# verdict: driver
# want: cap_add[0]: "net_admin" needs docker.allow_caps
job "tailscale" {
  type = "system"

  group "tailscale" {
    task "tailscale" {
      driver = "docker"

      config {
        image        = "tailscale/tailscale:v1.74"
        network_mode = "host"
        cap_add      = ["NET_ADMIN", "NET_RAW"]
        devices      = [{ host_path = "/dev/net/tun" }]
        volumes      = ["/var/lib/tailscale:/var/lib/tailscale"]
      }

      env {
        TS_STATE_DIR = "/var/lib/tailscale"
        TS_HOSTNAME  = "${node.unique.name}"
      }
    }
  }
}

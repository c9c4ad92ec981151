# shape: a node-local DNS cache on port 53 with only NET_BIND_SERVICE kept
# verdict: runs
job "dns-cache" {
  type = "system"

  group "dns" {
    network {
      port "dns" {
        static = 53
      }
    }

    task "coredns" {
      driver = "docker"

      config {
        image    = "coredns/coredns:1.11.1"
        ports    = ["dns"]
        args     = ["-conf", "/etc/coredns/Corefile", "-dns.port", "${NOMAD_PORT_dns}"]
        cap_drop = ["ALL"]
        cap_add  = ["NET_BIND_SERVICE"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}

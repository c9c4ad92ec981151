# shape: a Consul client agent per node on the host network, bound to the node's address
#        and joined to servers given as a list variable
# verdict: runs
variable "servers" {
  type    = list(string)
  default = ["10.0.0.10", "10.0.0.11", "10.0.0.12"]
}

job "consul-client" {
  type     = "system"
  priority = 90

  group "consul" {
    task "consul" {
      driver = "docker"

      config {
        image        = "hashicorp/consul:1.19"
        network_mode = "host"
        args = concat(
          ["agent", "-data-dir=/consul/data", "-bind=${attr.unique.network.ip-address}"],
          formatlist("-retry-join=%s", var.servers),
        )
        volumes = ["/opt/consul:/consul/data"]
      }

      resources {
        cpu    = 250
        memory = 256
      }
    }
  }
}

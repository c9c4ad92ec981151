# Agent 2 of the fleet example (examples/fleet/README.md): its own container
# on the fleet network, a client of the three-node NATS cluster.
name       = "agent-2"
datacenter = "eu-west"
meta = {
  rack = "r2"
  zone = "b"
}

# Inside the container; lost when the container is removed.
state_dir = "/var/lib/hivelet"

nats {
  # Container names on the fleet network. The agent connects to any of them
  # and reconnects to whichever is up.
  urls     = ["nats://nats-1:4222", "nats://nats-2:4222", "nats://nats-3:4222"]
  replicas = 3 # R3 buckets: any one NATS server may die

  # Short for the demo, so a node cut off from the network is seen as down
  # within seconds (heartbeat every node_ttl/3). The default is 30s.
  node_ttl        = "6s"
  request_timeout = "2s"
}

# Agent 2 of a three-agent fleet on one machine (examples/multihost/README.md).
# Each agent runs an embedded NATS server; the three are routed into one
# JetStream cluster that holds the buckets with three replicas.
name       = "agent-2"
datacenter = "eu-west"
meta = {
  rack = "r2"
  zone = "b"
}

state_dir = "/tmp/hivelet-multihost/agent-2"

http {
  address = "127.0.0.1:4647"
}

nats {
  replicas = 3 # every bucket on all three servers: any one may die

  embedded {
    host        = "127.0.0.1"       # clients: hivelet --nats nats://127.0.0.1:4223
    port        = 4223
    server_name = "hivelet-agent-2" # unique in the cluster, stable across restarts

    cluster {
      name   = "hivelet-demo"
      listen = "127.0.0.1:6223"
      # The same list on every member; a member skips the route to itself.
      routes = ["127.0.0.1:6222", "127.0.0.1:6223", "127.0.0.1:6224"]
    }
  }
}

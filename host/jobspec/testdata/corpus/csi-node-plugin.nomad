# shape: the node half of a CSI storage plugin (the csi_plugin examples of storage vendors)
# verdict: refused
# want: stanza "csi_plugin" is not supported by hivelet
job "csi-nodes" {
  type = "system"

  group "nodes" {
    task "plugin" {
      driver = "docker"

      config {
        image      = "example/csi-driver:1.0"
        privileged = true
      }

      csi_plugin {
        id        = "example"
        type      = "node"
        mount_dir = "/csi"
      }
    }
  }
}

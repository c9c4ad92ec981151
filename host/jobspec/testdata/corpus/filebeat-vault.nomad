# shape: a Filebeat shipper whose credentials come from Vault
# verdict: refused
# want: stanza "vault" is not supported by hivelet
job "filebeat" {
  type = "system"

  group "filebeat" {
    task "filebeat" {
      driver = "docker"
      user   = "root"

      vault {
        policies = ["filebeat"]
      }

      config {
        image   = "elastic/filebeat:8.15.0"
        volumes = ["/var/log:/var/log:ro"]
      }
    }
  }
}

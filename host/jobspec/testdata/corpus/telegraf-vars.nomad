# shape: a Telegraf agent whose image version, datacenters and resources are variables
#        (the pack-style jobs rendered with their defaults, here left as variables)
# verdict: runs
# vars: version=1.31 cpu=300
variable "version" {
  type    = string
  default = "1.30"
}

variable "datacenters" {
  type    = list(string)
  default = ["dc1"]
}

variable "cpu" {
  type    = number
  default = 200
  validation {
    condition     = var.cpu >= 100
    error_message = "Telegraf needs at least 100 MHz."
  }
}

locals {
  image = "telegraf:${var.version}-alpine"
}

job "telegraf" {
  datacenters = var.datacenters
  type        = "system"

  group "telegraf" {
    task "telegraf" {
      driver = "docker"

      config {
        image   = local.image
        volumes = ["/var/run/docker.sock:/var/run/docker.sock:ro", "/proc:/host/proc:ro"]
      }

      env {
        HOST_PROC = "/host/proc"
      }

      resources {
        cpu    = var.cpu
        memory = 128
      }
    }
  }
}

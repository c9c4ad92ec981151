# shape: a backup job dispatched with a payload (parameterized batch jobs)
# verdict: refused
# want: stanza "parameterized" is not supported by hivelet
job "backup" {
  type = "sysbatch"

  parameterized {
    payload       = "optional"
    meta_required = ["target"]
  }

  group "backup" {
    task "backup" {
      driver = "exec"
      config {
        command = "/usr/local/bin/backup"
        args    = ["${NOMAD_META_target}"]
      }
    }
  }
}

# shape: a nightly sysbatch clean-up launched by a periodic block
# verdict: refused
# want: stanza "periodic" is not supported by hivelet
job "nightly-gc" {
  type = "sysbatch"

  periodic {
    crons            = ["0 3 * * *"]
    prohibit_overlap = true
  }

  group "gc" {
    task "gc" {
      driver = "exec"
      config {
        command = "/usr/bin/find"
        args    = ["/tmp", "-mtime", "+7", "-delete"]
      }
    }
  }
}

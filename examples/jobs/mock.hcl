# The mock driver runs nothing: it reports a task that lives for run_for and
# exits with exit_code. Useful for trying rollouts on a laptop.
job "mock-demo" {
  type = "system"

  update {
    max_parallel = 1
  }

  group "demo" {
    count = 2

    task "sleeper" {
      driver = "mock"

      config {
        run_for       = "1h"
        exit_code     = 0
        stdout_string = "hello from ${node.unique.name}\n"
      }
    }
  }
}

# The job rss.sh and rss_follow.sh place: 1,000 mock allocations on the measured agent.
# The scripts write it under another name with sed (job "big" → job "<name>").
job "big" {
  type = "system"
  datacenters = ["dc1"]
  update {
    max_parallel = 0
  }
  group "g" {
    count = 1000
    task "t" {
      driver = "mock"
      config {
      }
    }
  }
}

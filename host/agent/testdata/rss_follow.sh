#!/bin/bash
# usage: HV=BIN rss_follow.sh — the dev agent's RSS per allocation, followed as it settles.
# Starts `hivelet agent` in dev configuration (NATS embedded), idle 20 s, then places one
# system job of 1,000 mock allocations (max_parallel 0) and prints the RSS over idle per
# allocation every 5 s for HVRSS_FOLLOW seconds (default 120); then places a second such job
# and prints what the second 1,000 added per allocation, 15 s after it returned. The page cache
# is dropped first when run as root (rss.sh says why). BENCHMARKS.md, "Agent memory per
# allocation in dev mode".
if [ -w /proc/sys/vm/drop_caches ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
HV=${HV:-./bin/hivelet}
FOLLOW=${HVRSS_FOLLOW:-120}
set -u
D=$(mktemp -d /tmp/hvrss-XXXX)
NP=$((20000 + RANDOM % 20000)); HP=$((20000 + RANDOM % 20000))
printf 'http {\n address = "127.0.0.1:%d"\n}\nnats {\n embedded_port = %d\n}\n' $HP $NP > $D/a.hcl
"$HV" agent -state-dir $D/s -config $D/a.hcl > $D/log 2>&1 &
PID=$!
sleep 20
kb() { awk '/VmRSS/ {print $2}' /proc/$PID/status; }
per() { awk -v d=$1 'BEGIN {printf "%.1f", d / 1000}'; } # KiB over 1,000 allocations: KiB each
job() {
  sed "s/^job \"big\"/job \"$1\"/" "$(dirname "$0")/rss_job.hcl" > $D/$1.hcl
  "$HV" job run -nats nats://127.0.0.1:$NP -timeout 300s $D/$1.hcl > /dev/null
}
I=$(kb)
echo "idle: $I kB"
job first
line=""
for t in $(seq 5 5 $FOLLOW); do sleep 5; line="$line $t:$(per $(( $(kb) - I )))"; done
echo "KiB per allocation over idle, by seconds after the job run returned:$line"
R1=$(kb)
job second
sleep 15
echo "the second 1,000 allocations, 15 s after: $(per $(( $(kb) - R1 ))) KiB each"
curl -s http://127.0.0.1:$HP/v1/plugins | grep -o '"pid": [0-9]*' | awk '{print $2}' > $D/pids
kill -TERM $PID; wait $PID
for p in $(cat $D/pids); do kill -KILL $p 2>/dev/null; done
rm -rf $D

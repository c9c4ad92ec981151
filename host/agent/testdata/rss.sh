#!/bin/bash
# usage: rss.sh [extra agent flags]; prints agent RSS idle and with 1000 mock allocations
# HV is the hivelet binary (default ./bin/hivelet: `make build`). Run from the repository root.
# HVRSS_FLEET=1 measures the fleet configuration: the measured agent connects to a NATS server
# it does not embed (a second agent, in datacenter "broker", embeds it and runs nothing), so
# the figure leaves out what the server holds of the allocations (their KV values, the
# watchers' consumers). Without it the measured agent embeds NATS (dev mode) and counts both.
# The binary's pages count in RSS when mapped, and the kernel maps the cached neighbours of
# each page faulted in (fault-around): a just-built binary, all in the page cache, measures up to
# ~4 MB more than the same binary started cold. So the page cache is dropped first when this
# runs as root (set HVRSS_KEEP_CACHE=1 to measure warm).
if [ -z "${HVRSS_KEEP_CACHE:-}" ] && [ -w /proc/sys/vm/drop_caches ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
HV=${HV:-./bin/hivelet}
set -u
D=$(mktemp -d /tmp/hvrss-XXXX)
NP=$((20000 + RANDOM % 20000)); HP=$((20000 + RANDOM % 20000)); BP=$((HP + 1))
BROKER=
if [ -n "${HVRSS_FLEET:-}" ]; then
  printf 'name = "broker"\ndatacenter = "broker"\nhttp {\n address = "127.0.0.1:%d"\n}\nnats {\n embedded_port = %d\n}\n' $BP $NP > $D/broker.hcl
  "$HV" agent -state-dir $D/sb -config $D/broker.hcl > $D/logb 2>&1 &
  BROKER=$!
  sleep 3
  printf 'name = "measured"\ndatacenter = "dc1"\nhttp {\n address = "127.0.0.1:%d"\n}\nnats {\n urls = ["nats://127.0.0.1:%d"]\n token_file = "%s"\n}\n' $HP $NP $D/sb/nats.token > $D/a.hcl
else
  printf 'http {\n address = "127.0.0.1:%d"\n}\nnats {\n embedded_port = %d\n}\n' $HP $NP > $D/a.hcl
fi
"$HV" agent -state-dir $D/s -config $D/a.hcl "$@" > $D/log 2>&1 &
PID=$!
sleep 20
rss() { awk '/VmRSS/ {print $2/1024 " MB"}' /proc/$1/status; }
echo "idle agent RSS: $(rss $PID)"
cp "$(dirname "$0")/rss_job.hcl" $D/big.hcl
time "$HV" job run -nats nats://127.0.0.1:$NP -timeout 300s $D/big.hcl | tail -2
sleep 15
echo "agent RSS with 1000 allocations: $(rss $PID)"
[ -n "$BROKER" ] && echo "broker (embedded NATS, no allocations) RSS: $(rss $BROKER)"
grep "reconcile pass" $D/log | tail -3 | grep -o "duration_ms=[0-9.]*"
curl -s http://127.0.0.1:$HP/v1/plugins | grep -o '"pid": [0-9]*' | awk '{print $2}' > $D/pids
[ -n "$BROKER" ] && curl -s http://127.0.0.1:$BP/v1/plugins | grep -o '"pid": [0-9]*' | awk '{print $2}' >> $D/pids
for p in $(cat $D/pids); do echo "plugin $p $(tr '\0' ' ' < /proc/$p/cmdline | cut -c1-40): $(rss $p)"; done
kill -TERM $PID; wait $PID
[ -n "$BROKER" ] && { kill -TERM $BROKER; wait $BROKER; }
for p in $(cat $D/pids); do kill -KILL $p 2>/dev/null; done
rm -rf $D

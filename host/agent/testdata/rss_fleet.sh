#!/bin/bash
# usage: host/agent/testdata/rss_fleet.sh BIN (from the repository root)
# Idle RSS of an agent connected to a NATS server it does not embed (the fleet configuration):
# agent A embeds NATS (the broker), agent B connects to it by URL; B is measured (and A, same moment).
# The binary's pages count in RSS when mapped, and the kernel maps the cached neighbours of
# each page faulted in (fault-around): a just-built binary, all in the page cache, measures up to
# ~4 MB more than the same binary started cold. So the page cache is dropped first when this
# runs as root (set HVRSS_KEEP_CACHE=1 to measure warm).
if [ -z "${HVRSS_KEEP_CACHE:-}" ] && [ -w /proc/sys/vm/drop_caches ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
HV=$1
D=$(mktemp -d /tmp/hvidle-XXXX)
NP=$((20000 + RANDOM % 20000)); HP=$((20000 + RANDOM % 20000)); HP2=$((HP + 1))
printf 'http {\n address = "127.0.0.1:%d"\n}\nnats {\n embedded_port = %d\n}\n' $HP $NP > $D/a.hcl
printf 'name = "b"\nhttp {\n address = "127.0.0.1:%d"\n}\nnats {\n urls = ["nats://127.0.0.1:%d"]\n token_file = "%s"\n}\n' $HP2 $NP $D/sa/nats.token > $D/b.hcl
"$HV" agent -state-dir $D/sa -config $D/a.hcl > $D/loga 2>&1 &
A=$!
sleep 3
"$HV" agent -state-dir $D/sb -config $D/b.hcl > $D/logb 2>&1 &
B=$!
sleep 20
echo "$HV fleet agent (external NATS): $(grep -E '^(Rss|Anonymous|Pss_File)' /proc/$B/smaps_rollup | awk '{printf "%s %.1fMB ", $1, $2/1024}')"
echo "$HV dev agent (embedded NATS, same moment): $(grep -E '^(Rss|Anonymous|Pss_File)' /proc/$A/smaps_rollup | awk '{printf "%s %.1fMB ", $1, $2/1024}')"
for port in $HP $HP2; do curl -s http://127.0.0.1:$port/v1/plugins | grep -o '"pid": [0-9]*' | awk '{print $2}'; done > $D/pids
kill -TERM $B; wait $B 2>/dev/null; kill -TERM $A; wait $A 2>/dev/null
for p in $(cat $D/pids); do kill -KILL $p 2>/dev/null; done
grep -iE "error|fatal" $D/logb | head -3
rm -rf $D

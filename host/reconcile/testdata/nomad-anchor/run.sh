#!/bin/bash
# Times Nomad's system-job node reconciler, (*NodeReconciler).Compute, beside
# hivelet's ReconcileFleet on the same fleet shapes, alternating the two test
# binaries five times (BENCHMARKS.md, "Against Nomad's node reconciler").
#
# usage: run.sh NOMAD_GIT_DIR [WORK_DIR]
#   NOMAD_GIT_DIR  a clone (or bare snapshot) of github.com/hashicorp/nomad;
#                  the commit measured is NOMAD_COMMIT (default below).
#   WORK_DIR       where Nomad is extracted and results are written
#                  (default /tmp/nomad-anchor). Nothing is written in this repository.
# Nomad's licence (BUSL) allows this local use; none of its code is copied
# into hivelet: anchor_bench_test.go is hivelet's, and calls Nomad's API.
set -eu
NOMAD_GIT=$1
W=${2:-/tmp/nomad-anchor}
NOMAD_COMMIT=${NOMAD_COMMIT:-aa026cc99cfb74a77e519a1c1f0c78ba1b452705}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../../.." && pwd)
mkdir -p "$W/nomad"
# Large blobs a snapshot may lack; none is in the scheduler's build.
git -C "$NOMAD_GIT" archive "$NOMAD_COMMIT" -- . \
  ':(exclude)command/agent/bindata_assetfs.go' ':(exclude)drivers/docker/test-resources/docker/busybox_glibc.tar' \
  ':(exclude)drivers/docker/test-resources/docker/busybox_linux_arm64.tar' ':(exclude)drivers/qemu/test-resources/linux-0.2.img' \
  | tar -x -C "$W/nomad"
cp "$HERE/anchor_bench_test.go" "$W/nomad/scheduler/reconciler/"
(cd "$W/nomad" && go test -c -o "$W/nomad.test" ./scheduler/reconciler)
(cd "$REPO" && go test -c -o "$W/hivelet.test" ./host/reconcile)
(cd "$W/nomad/scheduler/reconciler" && "$W/nomad.test" -test.run '^TestAnchorCounts$' -test.v) > "$W/nomad_counts.txt"
: > "$W/hivelet.txt"; : > "$W/nomad.txt"; : > "$W/uptime.log"
for i in 1 2 3 4 5; do
  echo "round $i hivelet $(uptime)" >> "$W/uptime.log"
  (cd "$REPO/host/reconcile" && "$W/hivelet.test" -test.run '^$' \
    -test.bench 'Reconciler$/^(steady|update|canary25)$/^nodes=(1000|10000)$' -test.benchmem) >> "$W/hivelet.txt"
  echo "round $i nomad $(uptime)" >> "$W/uptime.log"
  (cd "$W/nomad/scheduler/reconciler" && "$W/nomad.test" -test.run '^$' -test.bench 'Anchor$' -test.benchmem) >> "$W/nomad.txt"
done
# Medians of the five runs, per case: wall and CPU ns per allocation.
python3 - "$W/hivelet.txt" "$W/nomad.txt" <<'PY'
import re, statistics, sys
def med(path):
    out = {}
    for line in open(path):
        m = re.match(r'Benchmark(?:Reconciler|Anchor)/(\w+)/nodes=(\d+)-\d+\s+\d+\s+.*?([\d.]+) cpu-ns/alloc.*?([\d.]+) ns/alloc', line)
        if m is None:
            m2 = re.match(r'Benchmark(?:Reconciler|Anchor)/(\w+)/nodes=(\d+)-\d+\s+\d+\s+.*?([\d.]+) ns/alloc.*?([\d.]+) cpu-ns/alloc', line)
            if m2 is None:
                continue
            case, n, wall, cpu = m2.groups()
        else:
            case, n, cpu, wall = m.groups()
        out.setdefault((case, int(n)), []).append((float(wall), float(cpu)))
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in out.items()}
h, n = med(sys.argv[1]), med(sys.argv[2])
print("case nodes | nomad wall cpu | hivelet wall cpu | ratio wall cpu")
for k in sorted(h):
    if k in n:
        print(f"{k[0]} {k[1]} | {n[k][0]:.0f} {n[k][1]:.0f} | {h[k][0]:.0f} {h[k][1]:.0f} | {n[k][0]/h[k][0]:.1f}x {n[k][1]/h[k][1]:.1f}x")
PY

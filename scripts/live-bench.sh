#!/bin/bash
# p99 of vhost-scsi-bench on LUN 0 alone and while other LUNs are added,
# grown and removed through the control socket, alternating, medians:
#   scripts/live-bench.sh [TOOLS_DIR] [ROUNDS]
# Each round runs the bench (4k randread, QD1, 3 s, interrupt mode) once
# alone and once with `vhost-scsi-ctl target` cycling LUNs 1-3 as fast as
# it can; prints median IOPS and p99 of each and the cycles done.  It
# measures, asserts nothing (docs/performance.md has the figures).
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -u
T=${1:-build-bench/tools}
ROUNDS=${2:-5}
OUT=$(cd "$(dirname "$0")/.." && pwd)/out/live-bench
mkdir -p "$OUT"; : > "$OUT/results.txt"
sock=$OUT/t.sock ctl=$OUT/c.sock
rm -f "$sock" "$ctl"
"$T/vhost-scsi-target" --socket-path "$sock" --control "$ctl" --lun 0=null:1G --queues 1 \
    --threads 1 --poll off > "$OUT/target.log" 2>&1 &
pid=$!
for i in $(seq 100); do [ -S "$sock" ] && [ -S "$ctl" ] && break; sleep 0.05; done
cycle() {
    n=0
    while [ ! -e "$OUT/stop" ]; do
        l=$((1 + n % 3))
        "$T/vhost-scsi-ctl" target --control "$ctl" lun add "$l=null:64M" >/dev/null &&
        "$T/vhost-scsi-ctl" target --control "$ctl" lun resize "$l" 128M >/dev/null &&
        "$T/vhost-scsi-ctl" target --control "$ctl" lun remove "$l" >/dev/null || break
        n=$((n + 1))
    done
    echo "$n" > "$OUT/cycles"
}
for round in $(seq "$ROUNDS"); do
  for side in alone cycling; do
    rm -f "$OUT/stop" "$OUT/cycles"
    [ $side = cycling ] && { cycle & cpid=$!; }
    j=$("$T/vhost-scsi-bench" --socket "$sock" --time 3 --rw randread --bs 4k --iodepth 1 \
        --json -q 2>/dev/null)
    if [ $side = cycling ]; then touch "$OUT/stop"; wait $cpid; c=$(cat "$OUT/cycles"); else c=0; fi
    echo "$side $c $j" >> "$OUT/results.txt"
  done
done
kill $pid; wait $pid
python3 - "$OUT/results.txt" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    side, cycles, j = line.split(' ', 2)
    d = json.loads(j)
    rows.setdefault(side, []).append((d['iops'], d['lat_us']['p99'], int(cycles)))
for side, r in rows.items():
    print(side, 'median IOPS %.0f' % statistics.median(x[0] for x in r),
          'p99 %.1f us' % statistics.median(x[1] for x in r),
          'p99 runs', [x[1] for x in r], 'cycles', [x[2] for x in r])
PY

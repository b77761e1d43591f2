#!/bin/bash
# The latency of a well-behaved front-end alone and next to a hostile one on
# the same I/O thread, alternating, medians:
#   scripts/neighbour-bench.sh [TOOLS_DIR] [ROUNDS] [SECONDS]
# A daemon (--threads 1, so both connections' queues share one I/O
# thread; a fresh one for every run): LUN 0 ram:512M for the hostile
# front-end, LUN 1 ram:64M for the neighbour.  Each round runs the neighbour (vhost-scsi-bench QD1 4k
# randread on LUN 1) for SECONDS alone, then again while a second bench
# floods LUN 0 with --rw hostile (WRITE SAME of a pattern and of zeros and
# UNMAP over 1M blocks, 16 MiB READ and WRITE, QD 8).  Prints the median
# p50/p99/p99.9 and IOPS of each side and the ratio of the p99 medians,
# with the machine's load average before and after.  It measures, asserts
# nothing (tests/protocol/neighbour-test.c asserts the structure).
# NB_CPUS="T B" pins the target to CPU T and both benches to CPU B (taskset).
# FLOOD picks the hostile load: hostile (the default, as above); aptpl
# (PERSISTENT RESERVE OUT REGISTER AND IGNORE EXISTING KEY with APTPL on, a
# new key each, QD 32, on LUN 0 = ram:512M with --pr-dir under out/: every
# command a change of its state file); unmap (UNMAP of 1 MiB at random
# places, QD 32, on LUN 0 = a loop device over a 512 MiB file in out/: a
# block device, so BLKDISCARD; needs root and losetup).
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/build/tools}
ROUNDS=${2:-5}
SECS=${3:-3}
OUT=$ROOT/out/neighbour
mkdir -p "$OUT"; : > "$OUT/results.txt"
sock=$OUT/s.sock
pid=
TPIN=; BPIN=
if [ -n "${NB_CPUS:-}" ]; then
    read -r tc bc <<< "$NB_CPUS"
    TPIN="taskset -c $tc"; BPIN="taskset -c $bc"
fi
FLOOD=${FLOOD:-hostile}
LUN0=ram:512M; EXTRA=; HOSTILE_ARGS="--rw hostile --bs 16M --iodepth 8"
loopdev=
case $FLOOD in
hostile) ;;
aptpl)
    mkdir -p "$OUT/pr"; EXTRA="--pr-dir $OUT/pr"
    HOSTILE_ARGS="--rw aptpl --bs 4k --iodepth 32" ;;
unmap)
    truncate -s 512M "$OUT/unmap.img"
    loopdev=$(losetup -f --show "$OUT/unmap.img") || exit 1
    LUN0=file:$loopdev
    HOSTILE_ARGS="--rw unmap --bs 1M --iodepth 32" ;;
*) echo "FLOOD is hostile, aptpl or unmap" >&2; exit 2 ;;
esac
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; [ -n "$loopdev" ] && losetup -d "$loopdev"' EXIT
# A fresh daemon for every run: a flood's commands still in flight when its
# bench gives up must not slow the next run down.
start_target() {
    rm -f "$sock"
    rm -f "$OUT"/pr/*.pr
    # shellcheck disable=SC2086
    $TPIN "$DIR/vhost-scsi-target" --socket-path "$sock" --lun "0=$LUN0" --lun 1=ram:64M \
        --queues 1 --threads 1 --poll off $EXTRA > "$OUT/target.log" 2>&1 &
    pid=$!
    for i in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
}
stop_target() {
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null; pid=
}
# The neighbour's JSON, or its last error line (starved: no completion for 5 s).
neighbour() {
    local j
    j=$($BPIN "$DIR/vhost-scsi-bench" --socket "$sock" --lun 0:1 --rw randread --bs 4k --iodepth 1 \
        --time "$SECS" --json -q 2> "$OUT/neighbour.err")
    [ -n "$j" ] && echo "$j" || echo "FAILED $(grep vhost-scsi-bench "$OUT/neighbour.err" | tail -1)"
}
echo "load before: $(cat /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
    start_target
    echo "alone $(neighbour)" >> "$OUT/results.txt"
    stop_target
    start_target
    # shellcheck disable=SC2086
    $BPIN "$DIR/vhost-scsi-bench" --socket "$sock" --lun 0:0 $HOSTILE_ARGS \
        --time $((SECS + 2)) --json -q > "$OUT/hostile.json" 2>/dev/null &
    hpid=$!
    sleep 1       # the hostile queue full before the neighbour starts
    echo "hostile $(neighbour)" >> "$OUT/results.txt"
    stop_target
    wait $hpid 2>/dev/null
done
echo "load after: $(cat /proc/loadavg)"
python3 - "$OUT/results.txt" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    side, j = line.split(' ', 1)
    try:
        d = json.loads(j)
    except ValueError:
        print('a run failed:', side, j.strip()[:200])
        rows.setdefault(side + ' failed', []).append(1)
        continue
    l = d['lat_us']
    rows.setdefault(side, []).append((d['iops'], l['p50'], l['p99'], l['p99_9']))
med = {}
for side in ('alone', 'hostile'):
    v = rows.get(side, [])
    if not v:
        continue
    m = [statistics.median(x[i] for x in v) for i in range(4)]
    med[side] = m
    print('%-8s median IOPS %.0f p50 %.1f us p99 %.1f us p99.9 %.1f us' % (side, *m),
          'p99 runs', [x[2] for x in v], 'failed runs', len(rows.get(side + ' failed', [])))
if len(med) == 2:
    print('p99 ratio (hostile/alone) %.1f' % (med['hostile'][2] / med['alone'][2]))
PY

#!/bin/bash
# A/B of two builds of the target and bench, alternating, medians:
#   scripts/ab.sh A_TOOLS_DIR B_TOOLS_DIR [ROUNDS]
# (A_BENCH_ARGS / B_BENCH_ARGS: extra vhost-scsi-bench options for one side,
# e.g. B_BENCH_ARGS=--dirty-log with the same tools dir twice)
# Each round runs, for A then B, a null LUN in interrupt mode at QD1 and
# QD32 for 3 s (vhost-scsi-bench --json); prints median IOPS, p99 and the
# target's context switches and CPU per I/O.  It measures, asserts nothing.
# AB_LUN=SPEC serves another LUN (default null:1G, e.g. ram:1G), AB_BS
# another block size (default 4k); AB_POLL=1
# polls on both sides (target --poll on, bench --poll); AB_TPOLL=MODE sets
# the target's --poll alone (on, off, adaptive; the bench waits unless
# AB_POLL is set too); AB_QDS="1 32" the queue depths; AB_CPUS="T B" pins
# the target to CPU T and the bench to CPU B (taskset); AB_QUEUES=N gives
# the target N request queues (default 1; the bench uses them all).
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -u
A=${1:?A tools dir}
B=${2:?B tools dir}
ROUNDS=${3:-5}
LUN=${AB_LUN:-null:1G}
BS=${AB_BS:-4k}
TPOLL=off; BPOLL=
[ -n "${AB_POLL:-}" ] && TPOLL=on && BPOLL=--poll
TPOLL=${AB_TPOLL:-$TPOLL}
TPIN=; BPIN=
if [ -n "${AB_CPUS:-}" ]; then
  read -r tc bc <<< "$AB_CPUS"
  TPIN="taskset -c $tc"; BPIN="taskset -c $bc"
fi
echo "load before: $(cat /proc/loadavg)"
OUT=$(cd "$(dirname "$0")/.." && pwd)/out/ab
mkdir -p $OUT; : > $OUT/results.txt
for round in $(seq "$ROUNDS"); do
  for side in A B; do
    dir=$A; extra=${A_BENCH_ARGS:-}
    [ $side = B ] && dir=$B && extra=${B_BENCH_ARGS:-}
    for qd in ${AB_QDS:-1 32}; do
      sock=$OUT/s.sock; rm -f $sock
      $TPIN $dir/vhost-scsi-target --socket-path $sock --lun 0=$LUN --queues ${AB_QUEUES:-1} --threads 1 --poll $TPOLL > $OUT/target.log 2>&1 &
      pid=$!
      for i in $(seq 100); do [ -S $sock ] && break; sleep 0.05; done
      j=$($BPIN $dir/vhost-scsi-bench --socket $sock --time 3 --pid $pid --rw randread --bs $BS --iodepth $qd --json -q $BPOLL $extra 2>/dev/null)
      kill $pid; wait $pid
      echo "$side qd$qd $j" >> $OUT/results.txt
    done
  done
done
echo "load after: $(cat /proc/loadavg)"
python3 - $OUT/results.txt <<'PY'
import json,sys,statistics
rows={}
for line in open(sys.argv[1]):
    side,qd,j=line.split(' ',2)
    d=json.loads(j)
    rows.setdefault((side,qd),[]).append((d['iops'],d['lat_us']['p99'],d['backend']['ctxsw_per_io'],d['backend']['sys_us_per_io']+d['backend']['usr_us_per_io'],d['interrupts_per_io'],d['kicks_per_io']))
for k in sorted(rows):
    v=rows[k]
    print(k, 'median IOPS %.0f p99 %.1f us csw/IO %.4f cpu us/IO %.3f irq/IO %.4f kicks/IO %.4f' % tuple(statistics.median(x[i] for x in v) for i in range(6)), 'IOPS runs', [round(x[0]) for x in v])
PY

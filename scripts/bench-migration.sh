#!/bin/bash
# Live migration of one guest, vhost-scsi-target against QEMU's own
# virtio-scsi-pci + scsi-hd on the same files: runs
# tests/guest/migration-test.sh --migrations 1 (one TCG guest, fio randwrite
# + crc32c verify at 300 IOPS on a file LUN and on a `direct` file LUN,
# migrated once to a QEMU process on 127.0.0.1) alternately with each
# back-end, and reports QMP query-migrate's total-time and downtime of each
# run and their medians, with the machine's load average before each run.
# Every run also passes the test's own checks, or the benchmark stops.
#
# Usage: scripts/bench-migration.sh [--rounds N] [--load write|none]
#                                   [--build-dir DIR] [--out FILE]
#   --rounds N     runs per back-end (default 3), alternating
#   --load         the guest's load during the migration (default write)
#   --build-dir    meson build dir holding tools/vhost-scsi-target (build)
#   --out FILE     also write the report to FILE
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=3 LOAD=write BUILD_DIR=$SRC/build OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --load) LOAD=$2; shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) sed -n '/^# Usage:/,/^# SPDX/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done

RESULTS=$(mktemp)
LOG=$(mktemp)
trap 'rm -f "$RESULTS" "$LOG"' EXIT
for r in $(seq 1 "$ROUNDS"); do
    # Alternate which back-end goes first, too.
    if [ $((r % 2)) = 1 ]; then order="target qemu"; else order="qemu target"; fi
    for peer in $order; do
        load=$(cut -d' ' -f1-3 /proc/loadavg)
        if ! "$SRC/tests/guest/migration-test.sh" --migrations 1 --load "$LOAD" --peer "$peer" \
                --build-dir "$BUILD_DIR" >"$LOG" 2>&1; then
            echo "bench-migration: round $r, $peer: the migration test failed:" >&2
            grep -v '^ok' "$LOG" | tail -n 30 >&2
            exit 1
        fi
        line=$(grep -m1 'migration 1 (process 0 -> 1' "$LOG")
        total=$(sed -n 's/.*total-time \([0-9]*\) ms.*/\1/p' <<<"$line")
        down=$(sed -n 's/.*downtime \([0-9]*\) ms.*/\1/p' <<<"$line")
        mib=$(sed -n 's/.* \([0-9]*\) MiB transferred.*/\1/p' <<<"$line")
        echo "$r $peer $total $down $mib $load" | tee -a "$RESULTS" >&2
    done
done

python3 - "$RESULTS" "$LOAD" <<'EOF' | tee ${OUT:+"$OUT"}
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"live migration of one TCG guest (1 vCPU, 1 GiB), load: {sys.argv[2]}")
print(f"{'round':>5} {'back-end':<8} {'total-time ms':>13} {'downtime ms':>11} {'MiB sent':>8}  load avg before")
for r in rows:
    print(f"{r[0]:>5} {r[1]:<8} {r[2]:>13} {r[3]:>11} {r[4]:>8}  {' '.join(r[5:])}")
for peer in ("target", "qemu"):
    t = [int(r[2]) for r in rows if r[1] == peer]
    d = [int(r[3]) for r in rows if r[1] == peer]
    name = "vhost-scsi-target" if peer == "target" else "QEMU virtio-scsi-pci + scsi-hd"
    print(f"median {name}: total-time {statistics.median(t):.0f} ms, downtime {statistics.median(d):.0f} ms ({len(t)} runs)")
EOF

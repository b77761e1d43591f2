#!/bin/bash
# `make demo`: builds the project, serves a 1 GiB sparse file through
# vhost-scsi-target to a Linux guest on `-device vhost-user-scsi-pci`, and in
# the same guest run puts QEMU's own virtio-scsi-pci + scsi-hd (io_uring,
# iothread, O_DIRECT like the target's `direct` LUN) on an identical file.
# The guest runs the same fio jobs on both (4k randwrite and randread at
# QD16, time based, DEMO_ROUNDS rounds with the devices' order swapped
# every round, then a sized randwrite with crc32c verify); the medians, the
# rounds, the ratio and the interrupts per I/O of each are printed as a
# table and written to out/demo-results.txt.
# Exits non-zero if anything fails (build, target, guest, fio, verify).
#
# The target polls adaptively, as QEMU's iothread does by default (its
# poll-max-ns is 32 us): like with like.
#
# Environment: BUILD_DIR (default $BUILD, then build), DEMO_RUNTIME (seconds
# per timed job, default 10), DEMO_ROUNDS (default 3), DEMO_VERIFY_SIZE (default 64M),
# DEMO_TARGET_ARGS (the target's options, default "--poll adaptive"),
# DEMO_DEVICE_OPTS (more properties of both controllers, e.g. packed=on:
# packed virtqueues on both, like with like), DEMO_SKIP_DEPS=1
# to skip scripts/install-deps.sh, DEMO_SKIP_BUILD=1 to use the build as it is,
# DEMO_KEEP=1 to keep the work directory.
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC"
BUILD_DIR=${BUILD_DIR:-${BUILD:-build}}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$SRC/$BUILD_DIR ;; esac
RUNTIME=${DEMO_RUNTIME:-10}
ROUNDS=${DEMO_ROUNDS:-3}
VSIZE=${DEMO_VERIFY_SIZE:-64M}
TARGET_ARGS=${DEMO_TARGET_ARGS---poll adaptive}
DEVOPTS=${DEMO_DEVICE_OPTS:+,$DEMO_DEVICE_OPTS}
OUT_DIR=$SRC/out
RESULTS=$OUT_DIR/demo-results.txt
say() { echo "== $*"; }
# For wait_for_socket (it also sets up the guest tests' TAP helpers, unused here).
. "$SRC/tests/guest/lib.sh"

if [ -z "${DEMO_SKIP_DEPS:-}" ]; then
    say "checking packages"
    bash "$SRC/scripts/install-deps.sh"
fi

if [ -z "${DEMO_SKIP_BUILD:-}" ]; then
    say "building in $BUILD_DIR"
    bash "$SRC/scripts/build.sh" "$BUILD_DIR" release >/dev/null ||
        bash "$SRC/scripts/build.sh" "$BUILD_DIR" release
fi
TARGET=$BUILD_DIR/tools/vhost-scsi-target
[ -x "$TARGET" ] || { echo "demo: $TARGET missing after the build" >&2; exit 1; }

mkdir -p "$OUT_DIR"
WORK=$(mktemp -d "$OUT_DIR/demo-work.XXXXXX")
TARGET_PID=""
cleanup() {
    if [ -n "$TARGET_PID" ] && kill -0 "$TARGET_PID" 2>/dev/null; then
        kill "$TARGET_PID" 2>/dev/null || true
        wait "$TARGET_PID" 2>/dev/null || true
    fi
    if [ -n "${DEMO_KEEP:-}" ]; then echo "demo: work directory kept: $WORK"
    else rm -rf "$WORK"; fi
}
trap cleanup EXIT

say "guest image"
INITRD=$BUILD_DIR/guest-images/demo.cpio
"$SRC/scripts/mkinitramfs.sh" --out "$INITRD" --init-script "$SRC/tests/guest/demo-fio.sh"

# Two identical sparse files so neither device sees the other's data.
truncate -s 1G "$WORK/target.img" "$WORK/qemu.img"

say "starting vhost-scsi-target"
SOCK=$WORK/vhost-scsi.sock
"$TARGET" --socket-path "$SOCK" --lun "0=file:$WORK/target.img,direct" --queues 2 \
    $TARGET_ARGS >"$WORK/target.log" 2>&1 &
TARGET_PID=$!
if ! wait_for_socket "$SOCK" "$TARGET_PID"; then
    echo "demo: the target did not start:" >&2; cat "$WORK/target.log" >&2; exit 1
fi

# Fixed PCI slots let the guest tell the two controllers apart.
VUS_PCI=0000:00:04.0 QEMU_PCI=0000:00:05.0
QEMU_ARGS=(
    -chardev "socket,id=vus0,path=$SOCK"
    -device "vhost-user-scsi-pci,chardev=vus0,num_queues=2,addr=04.0${DEVOPTS}"
    -object iothread,id=io0
    -device "virtio-scsi-pci,id=vs0,num_queues=2,iothread=io0,addr=05.0${DEVOPTS}"
    -blockdev "driver=file,filename=$WORK/qemu.img,node-name=q0,aio=io_uring,cache.direct=on,discard=unmap"
    -device scsi-hd,bus=vs0.0,drive=q0
)
say "booting the guest (TCG; fio: $ROUNDS rounds of ${RUNTIME}s per timed job, $VSIZE verify job)"
LOG=$WORK/guest.log
rc=0
"$SRC/tests/guest/run-qemu.sh" --initrd "$INITRD" --log "$LOG" --timeout $((300 + ROUNDS * 4 * (RUNTIME + 10))) \
    --append "guest.devs=vhost-user-scsi@$VUS_PCI,qemu-virtio-scsi@$QEMU_PCI guest.runtime=$RUNTIME guest.rounds=$ROUNDS guest.verify_size=$VSIZE" \
    -- "${QEMU_ARGS[@]}" || rc=$?
tr -d '\r' <"$LOG" | grep -a '^# ' || true

tr -d '\r' <"$LOG" | grep -a '^DEMO-RESULT: ' | sed 's/^DEMO-RESULT: //' >"$WORK/results.txt" || true
{
    echo "vhost-scsi demo, $(date -u '+%Y-%m-%d %H:%M UTC'), $(qemu-system-x86_64 --version | head -n1)"
    echo "guest: Linux under TCG (-smp 2, 1G), 1 GiB sparse file per device, O_DIRECT on the host"
    echo "target options: --queues 2 $TARGET_ARGS; QEMU's iothread: its defaults (adaptive polling, up to 32 us)"
    [ -z "$DEVOPTS" ] || echo "both controllers with: ${DEVOPTS#,}"
    echo "fio: libaio, direct=1, bs=4k, iodepth=16, ${RUNTIME}s time_based (+2s ramp), $ROUNDS rounds,"
    echo "the devices' order swapped every round; verify: ${VSIZE} randwrite, crc32c"
    echo
    python3 - "$WORK/results.txt" "$RUNTIME" "$VSIZE" <<'PY'
import statistics, sys

path, runtime, vsize = sys.argv[1], float(sys.argv[2]), sys.argv[3]
devs = [("vhost-user-scsi", "vhost-scsi-target (vhost-user-scsi-pci)"),
        ("qemu-virtio-scsi", "QEMU virtio-scsi-pci + scsi-hd (io_uring, iothread)")]
rows = {}
for line in open(path):
    f = dict(w.split("=", 1) for w in line.split() if "=" in w)
    rows.setdefault((f.get("dev"), f.get("job")), []).append(f)


def cell(dev, job):
    rs = rows.get((dev, job))
    if not rs:
        return "missing", None
    bad = [r for r in rs if r.get("err") != "0"]
    if bad:
        return "ERROR (%s)" % bad[0].get("err"), None
    if "verify" in rs[0]:
        return "verify " + rs[0]["verify"], None
    iops = [int(r["iops"]) for r in rs]
    p99 = statistics.median(float(r["p99_us"]) for r in rs)
    # The interrupts were counted over the ramp too: I/Os scaled to the whole run.
    irq = statistics.median(int(r["irqs"]) / max(1.0, int(r["ios"]) * (runtime + 2) / runtime)
                            for r in rs)
    med = statistics.median(iops)
    return ("%7d IOPS %6.0f us p99 %5.3f irq/IO (%s)" %
            (med, p99, irq, " ".join(str(i) for i in iops)), med)


print("%-20s | %-60s | %-60s | %s" % ("job (medians)", devs[0][1], devs[1][1], "ratio"))
print("-" * 156)
for job in ["randwrite-4k-qd16", "randread-4k-qd16", "verify-" + vsize]:
    a, am = cell(devs[0][0], job)
    b, bm = cell(devs[1][0], job)
    ratio = "%.2fx" % (am / bm) if am and bm else ""
    print("%-20s | %-60s | %-60s | %s" % (job, a, b, ratio))
# The two disks of a round ran a minute apart at most: their ratio is
# less exposed to this machine's drift than the ratio of the medians.
print()
for job in ["randwrite-4k-qd16", "randread-4k-qd16"]:
    by_round = {}
    for dev, _ in devs:
        for r in rows.get((dev, job), []):
            if r.get("err") == "0" and "iops" in r:
                by_round.setdefault(r["round"], {})[dev] = int(r["iops"])
    ratios = [v[devs[0][0]] / v[devs[1][0]] for _, v in sorted(by_round.items())
              if len(v) == 2 and v[devs[1][0]]]
    if ratios:
        print("%-20s   per-round ratios %s, median %.2fx" %
              (job, " ".join("%.2f" % x for x in ratios), statistics.median(ratios)))
PY
    echo
    echo "Under TCG every guest instruction is emulated, so the absolute figures are"
    echo "small; the comparison between the two columns is what the demo shows."
    echo "Rounds in brackets; irq/IO: the disk's request-queue interrupts per I/O."
} >"$RESULTS"
cat "$RESULTS"

status=0
if [ "$rc" != 0 ]; then
    echo "demo: the guest run failed (status $rc); console log:" >&2
    tr -d '\r' <"$LOG" | tail -n 40 >&2
    status=1
fi
if ! kill -0 "$TARGET_PID" 2>/dev/null; then
    echo "demo: vhost-scsi-target died; its log:" >&2; tail -n 40 "$WORK/target.log" >&2
    status=1
fi
if grep -q 'ERROR\|missing\|FAIL' "$RESULTS"; then status=1; fi
say "results written to $RESULTS"
exit $status

#!/bin/bash
# `make demo`: builds the project, serves a 1 GiB sparse file through
# vhost-scsi-target to a Linux guest on `-device vhost-user-scsi-pci`, and in
# the same guest run puts QEMU's own virtio-scsi-pci + scsi-hd (io_uring,
# iothread, O_DIRECT like the target's `direct` LUN) on an identical file.
# The guest runs the same fio jobs on both (4k randwrite and randread at
# QD16, time based, DEMO_ROUNDS rounds with the devices' order swapped
# every round, then a sized randwrite with crc32c verify); the medians, the
# rounds, the ratio and the interrupts per I/O of each are printed as a
# table and written to out/demo-results.txt, with what each device cost the
# host per I/O (scripts/demo-phases.py reads the CPU time of the target and
# of QEMU's threads when the guest starts and ends each job).
# Exits non-zero if anything fails (build, target, guest, fio, verify).
#
# The target polls adaptively, as QEMU's iothread does by default (its
# poll-max-ns is 32 us): like with like.
#
# Environment: BUILD_DIR (default $BUILD, then build), DEMO_RUNTIME (seconds
# per timed job, default 10), DEMO_ROUNDS (default 3), DEMO_VERIFY_SIZE (default 64M),
# DEMO_TARGET_ARGS (the target's options, default "--poll adaptive"),
# DEMO_TARGET_B_ARGS (if set, a second target with these options serves a
# third disk, so that two target configurations and QEMU's device take
# turns in one guest), DEMO_TARGET_B (the second target's binary, e.g.
# another build's, to compare two builds; its options default to
# DEMO_TARGET_ARGS), DEMO_DEVICE_OPTS (more properties of the
# controllers, e.g. packed=on: packed virtqueues on all, like with like), DEMO_SKIP_DEPS=1
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
TARGET_B_ARGS=${DEMO_TARGET_B_ARGS:-}
DEVOPTS=${DEMO_DEVICE_OPTS:+,$DEMO_DEVICE_OPTS}
OUT_DIR=$SRC/out
RESULTS=$OUT_DIR/demo-results.txt
say() { echo "== $*"; }
# For wait_for_socket (it also sets up the guest tests' TAP helpers, unused here).
. "$SRC/tests/guest/lib.sh"

if [ -z "${DEMO_SKIP_DEPS:-}" ]; then
    say "checking packages"
    bash "$SRC/scripts/install-deps.sh" test
fi

if [ -z "${DEMO_SKIP_BUILD:-}" ]; then
    say "building in $BUILD_DIR"
    bash "$SRC/scripts/build.sh" "$BUILD_DIR" release >/dev/null ||
        bash "$SRC/scripts/build.sh" "$BUILD_DIR" release
fi
TARGET=$BUILD_DIR/tools/vhost-scsi-target
[ -x "$TARGET" ] || { echo "demo: $TARGET missing after the build" >&2; exit 1; }
TARGET_B=${DEMO_TARGET_B:-$TARGET}
if [ -n "${DEMO_TARGET_B:-}" ] && [ -z "$TARGET_B_ARGS" ]; then TARGET_B_ARGS=$TARGET_ARGS; fi
[ -z "$TARGET_B_ARGS" ] || [ -x "$TARGET_B" ] || { echo "demo: $TARGET_B is not executable" >&2; exit 1; }

mkdir -p "$OUT_DIR"
WORK=$(mktemp -d "$OUT_DIR/demo-work.XXXXXX")
TARGET_PID="" TARGET_B_PID="" WATCH_PID=""
cleanup() {
    for pid in "$WATCH_PID" "$TARGET_PID" "$TARGET_B_PID"; do
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    if [ -n "${DEMO_KEEP:-}" ]; then echo "demo: work directory kept: $WORK"
    else rm -rf "$WORK"; fi
}
trap cleanup EXIT

say "guest image"
INITRD=$BUILD_DIR/guest-images/demo.cpio
"$SRC/scripts/mkinitramfs.sh" --out "$INITRD" --init-script "$SRC/tests/guest/demo-fio.sh"

# Identical sparse files so no device sees another's data.
truncate -s 1G "$WORK/target.img" "$WORK/qemu.img"
[ -z "$TARGET_B_ARGS" ] || truncate -s 1G "$WORK/target-b.img"

start_target() {  # start_target BINARY SOCKET IMAGE LOG ARGS...: sets STARTED_PID
    local bin=$1 sock=$2 img=$3 log=$4; shift 4
    # The control socket (SOCKET's name, .ctl) lets demo-phases.py ask what woke its threads.
    "$bin" --socket-path "$sock" --control "${sock%.sock}.ctl" --lun "0=file:$img,direct" \
        --queues 2 "$@" >"$log" 2>&1 &
    STARTED_PID=$!
    if ! wait_for_socket "$sock" "$STARTED_PID"; then
        echo "demo: the target did not start:" >&2; cat "$log" >&2; exit 1
    fi
}
say "starting vhost-scsi-target"
SOCK=$WORK/vhost-scsi.sock
# shellcheck disable=SC2086 # the options are words
start_target "$TARGET" "$SOCK" "$WORK/target.img" "$WORK/target.log" $TARGET_ARGS
TARGET_PID=$STARTED_PID
if [ -n "$TARGET_B_ARGS" ]; then
    say "starting a second vhost-scsi-target ($TARGET_B_ARGS)"
    # shellcheck disable=SC2086
    start_target "$TARGET_B" "$WORK/vhost-scsi-b.sock" "$WORK/target-b.img" "$WORK/target-b.log" $TARGET_B_ARGS
    TARGET_B_PID=$STARTED_PID
fi

# Fixed PCI slots let the guest tell the controllers apart.
VUS_PCI=0000:00:04.0 QEMU_PCI=0000:00:05.0 VUS_B_PCI=0000:00:06.0
QEMU_ARGS=(
    -name demo,debug-threads=on -pidfile "$WORK/qemu.pid"
    -chardev "socket,id=vus0,path=$SOCK"
    -device "vhost-user-scsi-pci,chardev=vus0,num_queues=2,addr=04.0${DEVOPTS}"
    -object iothread,id=io0
    -device "virtio-scsi-pci,id=vs0,num_queues=2,iothread=io0,addr=05.0${DEVOPTS}"
    -blockdev "driver=file,filename=$WORK/qemu.img,node-name=q0,aio=io_uring,cache.direct=on,discard=unmap"
    -device scsi-hd,bus=vs0.0,drive=q0
)
GUEST_DEVS=vhost-user-scsi@$VUS_PCI,qemu-virtio-scsi@$QEMU_PCI
WATCHED=(vhost-user-scsi="$TARGET_PID@$WORK/vhost-scsi.ctl")
if [ -n "$TARGET_B_PID" ]; then
    QEMU_ARGS+=(-chardev "socket,id=vus1,path=$WORK/vhost-scsi-b.sock"
                -device "vhost-user-scsi-pci,chardev=vus1,num_queues=2,addr=06.0${DEVOPTS}")
    GUEST_DEVS=$GUEST_DEVS,vhost-user-scsi-b@$VUS_B_PCI
    WATCHED+=(vhost-user-scsi-b="$TARGET_B_PID@$WORK/vhost-scsi-b.ctl")
fi
say "booting the guest (TCG; fio: $ROUNDS rounds of ${RUNTIME}s per timed job, $VSIZE verify job)"
LOG=$WORK/guest.log
PHASES=$WORK/phases.txt
python3 "$SRC/scripts/demo-phases.py" "$LOG" "$WORK/qemu.pid" "$WORK/qemu.done" "$PHASES" \
    "${WATCHED[@]}" &
WATCH_PID=$!
rc=0
"$SRC/tests/guest/run-qemu.sh" --initrd "$INITRD" --log "$LOG" --timeout $((300 + ROUNDS * 6 * (RUNTIME + 10))) \
    --append "guest.devs=$GUEST_DEVS guest.runtime=$RUNTIME guest.rounds=$ROUNDS guest.verify_size=$VSIZE" \
    -- "${QEMU_ARGS[@]}" || rc=$?
# QEMU has exited: the watcher reads the rest of the log and ends.
touch "$WORK/qemu.done"
wait "$WATCH_PID" 2>/dev/null || true
WATCH_PID=""
tr -d '\r' <"$LOG" | grep -a '^# ' || true

tr -d '\r' <"$LOG" | grep -a '^DEMO-RESULT: ' | sed 's/^DEMO-RESULT: //' >"$WORK/results.txt" || true
{
    echo "vhost-scsi demo, $(date -u '+%Y-%m-%d %H:%M UTC'), $(qemu-system-x86_64 --version | head -n1)"
    echo "guest: Linux under TCG (-smp 2, 1G), 1 GiB sparse file per device, O_DIRECT on the host"
    echo "target options: --queues 2 $TARGET_ARGS; QEMU's iothread: its defaults (adaptive polling, up to 32 us)"
    [ -z "$TARGET_B_ARGS" ] || echo "target B: $TARGET_B --queues 2 $TARGET_B_ARGS"
    [ -z "$DEVOPTS" ] || echo "every controller with: ${DEVOPTS#,}"
    echo "fio: libaio, direct=1, bs=4k, iodepth=16, ${RUNTIME}s time_based (+2s ramp), $ROUNDS rounds,"
    echo "the devices' order swapped every round; verify: ${VSIZE} randwrite, crc32c"
    echo
    python3 - "$WORK/results.txt" "$PHASES" "$RUNTIME" "$VSIZE" "${TARGET_B_ARGS:+b}" <<'PY'
import statistics, sys

path, phases_path, runtime, vsize, with_b = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
QEMU = "qemu-virtio-scsi"
devs = [("vhost-user-scsi", "vhost-scsi-target")]
if with_b:
    devs.append(("vhost-user-scsi-b", "vhost-scsi-target B"))
devs.append((QEMU, "QEMU virtio-scsi + scsi-hd"))
rows = {}
for line in open(path):
    f = dict(w.split("=", 1) for w in line.split() if "=" in w)
    rows.setdefault((f.get("dev"), f.get("job")), []).append(f)

# CPU microseconds each job cost on the host, from demo-phases.py's
# snapshots at the job's begin and end: (dev, job, round) -> {counter: us}.
snaps = {}
try:
    for line in open(phases_path):
        words = line.split()
        f = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        snaps.setdefault((f.get("dev"), f.get("job"), f.get("round")), {})[words[0]] = f
except OSError:
    pass


def cost(dev, job, rnd):
    s = snaps.get((dev, job, rnd), {})
    b, e = s.get("begin"), s.get("end")
    if not b or not e:
        return None
    d = {}
    for k in b:
        if (k.startswith(("cpu_", "wake_", "wrk_", "kick_", "uring_")) and b[k] != "None"
                and e.get(k, "None") != "None"):
            d[k] = int(e[k]) - int(b[k])
    own = "iothread" if dev == QEMU else dev
    if "cpu_" + own not in d or "cpu_qemu" not in d:
        return None
    targets = sum(v for k, v in d.items() if k.startswith("cpu_vhost-user-scsi"))
    return (d["cpu_" + own], d.get("cpu_qemu_main", 0), d["cpu_qemu"] + targets,
            d.get("wake_" + own, 0), d.get("wake_qemu_main", 0),
            d.get("kick_" + own), d.get("uring_" + own), d.get("wrk_" + own))


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
    # The interrupts and the CPU were counted over the ramp too: I/Os
    # scaled to the whole run.
    whole = [max(1.0, int(r["ios"]) * (runtime + 2) / runtime) for r in rs]
    irq = statistics.median(int(r["irqs"]) / n for r, n in zip(rs, whole))
    costs = [(cost(dev, job, r["round"]), n) for r, n in zip(rs, whole)]
    costs = [(c, n) for c, n in costs if c]
    cpu = "%6s %6s %6s %5s %5s" % ("-", "-", "-", "-", "-")
    if costs:
        cpu = "%6.1f %6.1f %6.1f %5.2f %5.2f" % tuple(
            statistics.median(c[i] / n for c, n in costs) for i in range(5))
    med = statistics.median(iops)
    return ("%7d %6.0f %6.3f %s  (%s)" %
            (med, p99, irq, cpu, " ".join(str(i) for i in iops)), med)


print("%-18s %-27s %7s %6s %6s  %-20s  %-11s  %s" %
      ("", "", "", "", "", "host CPU us/IO", "wake-ups/IO", ""))
print("%-18s %-27s %7s %6s %6s %6s %6s %6s %5s %5s  %-20s %s" %
      ("job (medians)", "device", "IOPS", "p99 us", "irq/IO", "dev", "main", "host", "dev", "main",
       "(rounds' IOPS)", "/ QEMU"))
print("-" * 132)
for job in ["randwrite-4k-qd16", "randread-4k-qd16", "verify-" + vsize]:
    qtext, qmed = cell(QEMU, job)
    for dev, title in devs:
        text, med = (qtext, qmed) if dev == QEMU else cell(dev, job)
        ratio = "%.2fx" % (med / qmed) if med and qmed and dev != QEMU else ""
        print("%-18s %-27s %s %s" % (job, title, text, ratio))
# Where the device's wake-ups are: its io_uring workers' (the kernel's
# threads for writes that would block, an allocating write to the sparse
# image), and for a target what woke its I/O threads (its stats): a kick is
# a request the thread was asleep for, a completion a host write or read it
# was asleep for; the rest are the daemon's other threads.
print()
for dev, title in devs:
    for job in ["randwrite-4k-qd16", "randread-4k-qd16"]:
        got = []
        for r in rows.get((dev, job), []):
            c = cost(dev, job, r.get("round"))
            if r.get("err") == "0" and "ios" in r and c:
                n = max(1.0, int(r["ios"]) * (runtime + 2) / runtime)
                got.append([None if v is None else v / n for v in c[3:]])
        if not got:
            continue

        def med(i):
            vals = [g[i] for g in got if g[i] is not None]
            return "%.2f" % statistics.median(vals) if vals else "-"
        line = "%-27s %-18s wake-ups/IO %s, io_uring workers' %s" % (title, job, med(0), med(4))
        if dev != QEMU:
            line += "; I/O threads woken by a kick %s, by a completion %s" % (med(2), med(3))
        print(line)
# The disks of a round ran a minute or two apart at most: their ratio is
# less exposed to this machine's drift than the ratio of the medians.
print()
for dev, title in devs[:-1]:
    for job in ["randwrite-4k-qd16", "randread-4k-qd16"]:
        by_round = {}
        for d in (dev, QEMU):
            for r in rows.get((d, job), []):
                if r.get("err") == "0" and "iops" in r:
                    by_round.setdefault(r["round"], {})[d] = int(r["iops"])
        ratios = [v[dev] / v[QEMU] for _, v in sorted(by_round.items())
                  if len(v) == 2 and v[QEMU]]
        if ratios:
            print("%-20s %-18s per-round ratios to QEMU %s, median %.2fx" %
                  (title, job, " ".join("%.2f" % x for x in ratios), statistics.median(ratios)))
PY
    echo
    echo "Under TCG every guest instruction is emulated, so the absolute figures are"
    echo "small; the comparison between the two columns is what the demo shows."
    echo "irq/IO: the disk's request-queue interrupts per I/O. Host CPU per I/O (us, median"
    echo "of the rounds): dev = the device's own threads (the target process; QEMU's iothread and"
    echo "its io_uring workers),"
    echo "main = QEMU's main loop (under TCG it turns every call eventfd into an interrupt),"
    echo "host = QEMU and the target(s) together: the guest's vCPUs included. Wake-ups per I/O:"
    echo "voluntary context switches of dev and main (each a sleep ended by a kick, a call or a"
    echo "completion)."
} >"$RESULTS"
cat "$RESULTS"

status=0
if [ "$rc" != 0 ]; then
    echo "demo: the guest run failed (status $rc); console log:" >&2
    tr -d '\r' <"$LOG" | tail -n 40 >&2
    status=1
fi
for t in "$TARGET_PID:target" "$TARGET_B_PID:target-b"; do
    [ "${t%%:*}" != "" ] || continue
    if ! kill -0 "${t%%:*}" 2>/dev/null; then
        echo "demo: vhost-scsi-target (${t#*:}) died; its log:" >&2; tail -n 40 "$WORK/${t#*:}.log" >&2
        status=1
    fi
done
if grep -q 'ERROR\|missing\|FAIL' "$RESULTS"; then status=1; fi
say "results written to $RESULTS"
exit $status

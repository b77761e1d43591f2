#!/bin/bash
# The peer comparison: vhost-scsi-target against SPDK's vhost
# (../shared/peers/spdk/, built into /opt/peers/spdk), both driven by our
# own vhost-scsi-bench, target pinned to CPU 0 and bench to CPU 1.  Each
# configuration runs REPS rounds; a round runs both targets one after the
# other, the order swapped every round, so drift of this machine's speed
# falls on both alike; the table gives medians and the ratio ours/SPDK.
# Like is compared with like: our null:...,fill=none against SPDK's null
# bdev (neither touches read buffers), ram: against SPDK's malloc bdev
# (both copy); our zero-filling null: default gets its own rows.  Rows
# marked "loaded host" run with a nice -n 10 busy loop on each core
# (compare each with its unloaded twin, IOPS and system time per I/O).
# With PEER_BLOCKDEV=/dev/X (a block device whose contents may be
# overwritten), rows of a file: LUN with O_DIRECT on it against
# SPDK's aio bdev on it, and host fio (io_uring, O_DIRECT, on CPU 1) on it
# as a third party in each round.
# A second table sets two target threads against one, and SPDK's
# two reactors against one, each run with two bench processes free to
# use both CPUs, at 256k where the target's copy is most of the work.
# Rows named *-packed give our target packed virtqueues (vhost-scsi-bench
# --packed, as a guest with packed=on): SPDK's vhost-scsi does not offer
# VIRTIO_F_RING_PACKED, so its side of those rows is its split ring, what
# such a guest gets from it; each has its split twin in the table.
# Writes the "SPDK peer" section of docs/performance.md (kept below the
# analysis marker by make bench) and the raw JSON lines in out/bench-peer/.
# Without an SPDK build the section says how to get one.  Asserts nothing.
#
# Environment: BENCH_BUILD (default build-bench), BENCH_RUNTIME (5),
# BENCH_REPS (3), BENCH_DOC (docs/performance.md), SPDK_DIR
# (/opt/peers/spdk), PEER_ONLY="row-name ..." to run a subset,
# PEER_BLOCKDEV (above).
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC"
BUILD=${BENCH_BUILD:-build-bench}
case "$BUILD" in /*) ;; *) BUILD=$SRC/$BUILD ;; esac
RUNTIME=${BENCH_RUNTIME:-5}
REPS=${BENCH_REPS:-3}
DOC=${BENCH_DOC:-$SRC/docs/performance.md}
SPDK=${SPDK_DIR:-/opt/peers/spdk}
OUT=$SRC/out/bench-peer
TARGET=$BUILD/tools/vhost-scsi-target
BENCH=$BUILD/tools/vhost-scsi-bench
say() { echo "== $*" >&2; }

write_section() {  # write_section FILE: replaces the section in $DOC
    python3 - "$DOC" "$1" <<'EOF'
import re, sys
doc, new = sys.argv[1], open(sys.argv[2]).read().rstrip("\n") + "\n"
text = open(doc).read()
head = "## SPDK peer"
m = re.search(r"^" + re.escape(head) + r"\n.*?(?=^## |\Z)", text, re.S | re.M)
if m:
    text = text[:m.start()] + new + "\n" + text[m.end():]
else:
    text = text.rstrip("\n") + "\n\n" + new
open(doc, "w").write(text)
EOF
}

if [ ! -x "$SPDK/build/bin/vhost" ]; then
    say "no SPDK build in $SPDK: writing how to get one"
    cat >"$OUT.md" <<EOF
## SPDK peer

Not measured on this machine: there is no SPDK build in \`$SPDK\`.
\`../shared/peers/spdk/build.sh\` builds SPDK v24.09's vhost there (about
five minutes); \`bash scripts/bench-peer.sh\` (or \`make bench\`) then runs
the comparison and writes this section.
EOF
    mkdir -p "$(dirname "$OUT")"
    write_section "$OUT.md"
    rm -f "$OUT.md"
    exit 0
fi
for b in "$TARGET" "$BENCH"; do
    [ -x "$b" ] || { echo "bench-peer: $b missing (build $BUILD first)" >&2; exit 1; }
done

rm -rf "$OUT"
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/bench-peer.XXXXXX)
PID=""
stop() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill -INT "$PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.05; done
        kill -KILL "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    PID=""
}

wait_socket() {  # wait_socket PATH: until it exists, or the process died
    for _ in $(seq 400); do
        [ -S "$1" ] && return 0
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.05
    done
    echo "bench-peer: no socket $1" >&2
    cat "$WORK/target.log" >&2
    exit 1
}

# ours_start CPUS LUN POLL QUEUES THREADS: our target; sets PID and SOCK.
ours_start() {
    SOCK=$WORK/ours.sock
    rm -f "$SOCK"
    setsid taskset -c "$1" "$TARGET" --socket-path "$SOCK" --lun "0=$2" --queues "$4" \
        --threads "$5" --poll "$3" >"$WORK/target.log" 2>&1 &
    PID=$!
    wait_socket "$SOCK"
}

# ours LUN POLL QUEUES: our target on CPU 0, one thread; sets PID and SOCK.
ours() {
    ours_start 0 "$1" "$2" "$3" 1
}

# bdev_args BDEV: the arguments of SPDK's bdev_BDEV_create for Peer0, as
# run and as the commands list of the table shows them.
bdev_args() {
    case "$1" in
        null) echo "Peer0 1024 512" ;;
        malloc) echo "-b Peer0 64 512" ;;
        aio) echo "$PEER_BLOCKDEV Peer0 512" ;;
    esac
}

# spdk_start CPUS MASK MEM_MB: SPDK's vhost (no hugepages) on CPUS with
# reactors MASK, its RPC socket up; sets PID.
spdk_start() {
    rm -rf "$WORK/spdk"
    mkdir -p "$WORK/spdk"
    (cd "$SPDK" && LD_LIBRARY_PATH=build/lib exec setsid taskset -c "$1" build/bin/vhost --no-huge \
        -s "$3" -m "$2" -u -S "$WORK/spdk" -r "$WORK/spdk.sock") >"$WORK/target.log" 2>&1 &
    PID=$!
    wait_socket "$WORK/spdk.sock"
}

# spdk BDEV: SPDK's vhost on CPU 0 (one reactor), one controller with the
# bdev as target 0; sets PID and SOCK.
spdk() {
    local r="python3 $SPDK/scripts/rpc.py -s $WORK/spdk.sock"
    SOCK=$WORK/spdk/vhost.0
    spdk_start 0 0x1 1024
    # shellcheck disable=SC2046
    $r bdev_"$1"_create $(bdev_args "$1") >/dev/null
    $r vhost_create_scsi_controller vhost.0 >/dev/null
    $r vhost_scsi_controller_add_target vhost.0 0 Peer0 >/dev/null
    wait_socket "$SOCK"
}

# bench NAME WHO REP "BENCH ARGS": one run on CPU 1, one JSON line.
bench() {
    local j
    # shellcheck disable=SC2086
    if ! j=$(setsid taskset -c 1 "$BENCH" --socket "$SOCK" --json -q --time "$RUNTIME" \
        --pid "$PID" $4); then
        echo "bench-peer: run failed: $1 ($2)" >&2
        cat "$WORK/target.log" >&2
        exit 1
    fi
    printf '%s\n' "${j%\}}"',"who":"'"$2"'","rep":'"$3"',"loadavg":'"$(cut -d' ' -f1 /proc/loadavg)"'}' \
        >>"$OUT/$1.jsonl"
}

# fill: writes the whole 64 MiB LUN once, untimed.  SPDK's malloc bdev
# zeroes its memory when created; our ram: LUN maps it on first write, and
# on a freshly booted VM of this kind a guest page's first touch is a trip
# to the host (reads of a never-written ram: LUN ran at 1/8 the speed of
# written ones): both targets are measured on written memory.
fill() {
    if ! setsid taskset -c 1 "$BENCH" --socket "$SOCK" -q --rw write --bs 64k --iodepth 8 \
        --ios 1024 >/dev/null; then
        echo "bench-peer: fill failed" >&2
        cat "$WORK/target.log" >&2
        exit 1
    fi
}

# The loaded host: a nice -n 10 busy loop on
# each core for the length of a run; LOOPS holds their pids.
LOOPS=()
load_start() {
    local c
    for c in 0 1; do
        setsid nice -n 10 taskset -c $c sh -c 'while :; do :; done' &
        LOOPS+=($!)
    done
}
load_stop() {
    [ ${#LOOPS[@]} -gt 0 ] || return 0
    kill "${LOOPS[@]}" 2>/dev/null || true
    wait "${LOOPS[@]}" 2>/dev/null || true
    LOOPS=()
}
trap 'load_stop; stop; rm -rf "$WORK"' EXIT

# hostfio NAME REP "BENCH ARGS": fio with io_uring on PEER_BLOCKDEV, on
# CPU 1 like the bench, the same pattern and depth; one JSON line shaped
# like the bench's (iops, lat_us.p99).
hostfio() {
    local rw depth
    rw=$(sed -n 's/.*--rw \([a-z]*\).*/\1/p' <<<"$3")
    depth=$(sed -n 's/.*--iodepth \([0-9]*\).*/\1/p' <<<"$3")
    setsid taskset -c 1 fio --name=peer --filename="$PEER_BLOCKDEV" --direct=1 \
        --ioengine=io_uring --rw="$rw" --bs=4k --iodepth="$depth" --runtime="$RUNTIME" \
        --time_based --output-format=json 2>/dev/null |
    python3 -c 'import json, sys
j = json.load(sys.stdin)["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] else j["write"]
print(json.dumps({"iops": d["iops"], "lat_us": {"p99": d["clat_ns"]["percentile"]["99.000000"] / 1000},
                  "who": "fio", "rep": int(sys.argv[1]), "loadavg": float(open("/proc/loadavg").read().split()[0])}))' \
        "$2" >>"$OUT/$1.jsonl"
}

# spdk_rate ROW REP: " --rate N", N the IOPS of SPDK's run of that round.
spdk_rate() {
    python3 -c 'import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print(" --rate %d" % [r for r in runs if r["who"] == "spdk" and r["rep"] == int(sys.argv[2])][-1]["iops"])' \
        "$OUT/$1.jsonl" "$2"
}

# selected NAME: whether PEER_ONLY (if set) names the row.
selected() {
    [ -z "${PEER_ONLY:-}" ] || [[ " $PEER_ONLY " == *" $1 "* ]]
}

ROWS=()
# row NAME "DESCRIPTION" OURS_LUN OURS_POLL QUEUES SPDK_BDEV "BENCH ARGS" [loaded]
# (OURS_BENCH="ARGS" row ...: more bench options against our target only;
# AT_SPDK_RATE=1 row ...: each round runs SPDK first and then ours with
# --rate at the IOPS SPDK reached in that round: what our target's CPU
# is at SPDK's rate)
row() {
    local name=$1 desc=$2 lun=$3 poll=$4 queues=$5 bdev=$6 bargs=$7 loaded=${8:-} i
    selected "$name" || return 0
    say "$name: $desc"
    ROWS+=("$name")
    printf '%s\t%s\t%s\t%s\n' "$desc" \
        "taskset -c 0 vhost-scsi-target --socket-path S --lun 0=$lun --queues $queues --threads 1 --poll $poll" \
        "SPDK vhost -m 0x1 --no-huge -s 1024; bdev_${bdev}_create $(bdev_args "$bdev")" \
        "taskset -c 1 vhost-scsi-bench --socket S --time $RUNTIME --pid PID $bargs${OURS_BENCH:+ (ours: $OURS_BENCH)}${AT_SPDK_RATE:+ (ours: --rate at the IOPS SPDK reached in the same round)}" \
        >"$OUT/$name.desc"
    for i in $(seq "$REPS"); do
        for who in $([ $((i % 2)) = 1 ] && [ -z "${AT_SPDK_RATE:-}" ] && echo "ours spdk" ||
                     echo "spdk ours") \
                $([ "$bdev" = aio ] && echo fio); do
            if [ "$who" = fio ]; then
                hostfio "$name" "$i" "$bargs"
                continue
            fi
            if [ "$who" = ours ]; then ours "$lun" "$poll" "$queues"; else spdk "$bdev"; fi
            [ "$bdev" = malloc ] && fill
            [ -n "$loaded" ] && load_start
            bench "$name" "$who" "$i" "$bargs --queues $queues$([ "$who" = ours ] &&
                echo " ${OURS_BENCH:-}")$([ "$who" = ours ] && [ -n "${AT_SPDK_RATE:-}" ] &&
                spdk_rate "$name" "$i")"
            load_stop
            stop
        done
    done
}

R="--rw randread --bs 4k"
row null-qd32-poll "null, QD32, bench polls, target --poll on" \
    "null:1G,fill=none" on 1 null "$R --iodepth 32 --poll"
row null-qd32-wait-pollon "null, QD32, bench waits, target --poll on" \
    "null:1G,fill=none" on 1 null "$R --iodepth 32"
row null-qd32-wait-polloff "null, QD32, bench waits, target --poll off" \
    "null:1G,fill=none" off 1 null "$R --iodepth 32"
row null-qd32-wait-adaptive "null, QD32, bench waits, target --poll adaptive" \
    "null:1G,fill=none" adaptive 1 null "$R --iodepth 32"
row null-qd1-poll "null, QD1, bench polls, target --poll on" \
    "null:1G,fill=none" on 1 null "$R --iodepth 1 --poll"
row null-qd1-wait-pollon "null, QD1, bench waits, target --poll on" \
    "null:1G,fill=none" on 1 null "$R --iodepth 1"
row null-qd1-wait-polloff "null, QD1, bench waits, target --poll off" \
    "null:1G,fill=none" off 1 null "$R --iodepth 1"
# Packed rings against ours (SPDK: split, it offers no other).
OURS_BENCH=--packed row null-qd32-poll-packed \
    "null, QD32, bench polls, target --poll on; ours packed rings" \
    "null:1G,fill=none" on 1 null "$R --iodepth 32 --poll"
OURS_BENCH=--packed row null-qd32-wait-adaptive-packed \
    "null, QD32, bench waits, target --poll adaptive; ours packed rings" \
    "null:1G,fill=none" adaptive 1 null "$R --iodepth 32"
OURS_BENCH=--packed row null-qd1-poll-packed \
    "null, QD1, bench polls, target --poll on; ours packed rings" \
    "null:1G,fill=none" on 1 null "$R --iodepth 1 --poll"
OURS_BENCH=--packed row null-qd1-wait-pollon-packed \
    "null, QD1, bench waits, target --poll on; ours packed rings" \
    "null:1G,fill=none" on 1 null "$R --iodepth 1"
# Inflight tracking as QEMU 8.2+'s vhost-user-scsi sets it up (both targets offer it).
row null-qd32-poll-inflight "null, QD32, bench polls, target --poll on; inflight tracking" \
    "null:1G,fill=none" on 1 null "$R --iodepth 32 --poll --inflight"
row null-qd1-poll-inflight "null, QD1, bench polls, target --poll on; inflight tracking" \
    "null:1G,fill=none" on 1 null "$R --iodepth 1 --poll --inflight"
row null-2q-qd64-poll "null, 2 queues x QD64, bench polls, target --poll on" \
    "null:1G,fill=none" on 2 null "$R --iodepth 64 --poll"
row zero-qd32-poll "null zero-filled (our default), QD32, bench polls, --poll on" \
    "null:1G" on 1 null "$R --iodepth 32 --poll"
row ram-qd32-poll "ram vs malloc, QD32, bench polls, target --poll on" \
    "ram:64M" on 1 malloc "$R --iodepth 32 --poll"
row ram-qd32-wait-pollon "ram vs malloc, QD32, bench waits, target --poll on" \
    "ram:64M" on 1 malloc "$R --iodepth 32"
row ram-qd1-poll "ram vs malloc, QD1, bench polls, target --poll on" \
    "ram:64M" on 1 malloc "$R --iodepth 1 --poll"
# The loaded host: the same under two nice -n 10 busy loops, one per core.
row null-qd32-wait-polloff-loaded "null, QD32, bench waits, target --poll off, loaded host" \
    "null:1G,fill=none" off 1 null "$R --iodepth 32" loaded
row null-qd1-wait-polloff-loaded "null, QD1, bench waits, target --poll off, loaded host" \
    "null:1G,fill=none" off 1 null "$R --iodepth 1" loaded
row null-qd32-poll-loaded "null, QD32, bench polls, target --poll on, loaded host" \
    "null:1G,fill=none" on 1 null "$R --iodepth 32 --poll" loaded
# A file: LUN with O_DIRECT on a block device (PEER_BLOCKDEV only).
if [ -n "${PEER_BLOCKDEV:-}" ]; then
    [ -b "$PEER_BLOCKDEV" ] || { echo "bench-peer: $PEER_BLOCKDEV is not a block device" >&2; exit 1; }
    row blockdev-qd32-randread "block device, randread QD32, bench waits, target --poll off" \
        "file:$PEER_BLOCKDEV,direct" off 1 aio "$R --iodepth 32"
    row blockdev-qd32-randwrite "block device, randwrite QD32, bench waits, target --poll off" \
        "file:$PEER_BLOCKDEV,direct" off 1 aio "--rw randwrite --bs 4k --iodepth 32"
    # Like with like: SPDK's reactor polls the aio completions too.
    row blockdev-qd32-randread-adaptive "block device, randread QD32, bench waits, target --poll adaptive" \
        "file:$PEER_BLOCKDEV,direct" adaptive 1 aio "$R --iodepth 32"
    row blockdev-qd32-randwrite-adaptive "block device, randwrite QD32, bench waits, target --poll adaptive" \
        "file:$PEER_BLOCKDEV,direct" adaptive 1 aio "--rw randwrite --bs 4k --iodepth 32"
    # Both spend a core: on a host whose wake-ups cost more than the
    # device's latency, the mode that answers as SPDK's reactor does.
    row blockdev-qd32-randread-pollon "block device, randread QD32, bench waits, target --poll on" \
        "file:$PEER_BLOCKDEV,direct" on 1 aio "$R --iodepth 32"
    row blockdev-qd32-randwrite-pollon "block device, randwrite QD32, bench waits, target --poll on" \
        "file:$PEER_BLOCKDEV,direct" on 1 aio "--rw randwrite --bs 4k --iodepth 32"
fi
# Ours paced at the IOPS SPDK reached in the same round (its CPU is the figure).
AT_SPDK_RATE=1 row null-qd32-wait-adaptive-at-spdk-rate \
    "null, QD32, bench waits, target --poll adaptive, ours at SPDK's IOPS (--rate)" \
    "null:1G,fill=none" adaptive 1 null "$R --iodepth 32"
AT_SPDK_RATE=1 OURS_BENCH=--packed row null-qd32-wait-adaptive-at-spdk-rate-packed \
    "null, QD32, bench waits, target --poll adaptive, ours at SPDK's IOPS (--rate); ours packed rings" \
    "null:1G,fill=none" adaptive 1 null "$R --iodepth 32"
# Idle: a front-end attached, nothing issued; only CPU counts.
row idle-adaptive "idle (front-end attached, no I/O), target --poll adaptive" \
    "null:1G,fill=none" adaptive 1 null "--idle"

# Two target threads against one, and against SPDK with two
# reactors.  Each run serves two queues to two bench processes, one queue
# each (SPDK gives each reactor a controller of its own, its unit of
# placement; ours takes both queues on one socket, --first-queue), both
# benches free to run on either CPU: on two CPUs a second thread or
# reactor has to share its core with a bench, so the rows use large
# requests, where the target's copy is the work and a bench's share of a
# core is small.  SCALE_ROWS lists them for the second table.
SCALE_ROWS=()
# ours_n N LUN POLL: our target on CPUs 0..N-1 with N threads, two queues;
# one LUN for both benches, so only the first fills it.
ours_n() {
    ours_start "$([ "$1" = 1 ] && echo 0 || echo 0,1)" "$2" "$3" 2 "$1"
    SOCKS=("$SOCK" "$SOCK")
    QARGS=("--first-queue 0" "--first-queue 1")
}
# spdk_n N MB: SPDK with N reactors, two controllers of one malloc bdev
# each (MB MiB), on reactor 0 and reactor N-1.
spdk_n() {
    local r="python3 $SPDK/scripts/rpc.py -s $WORK/spdk.sock" c
    spdk_start "$([ "$1" = 1 ] && echo 0 || echo 0,1)" "$([ "$1" = 1 ] && echo 0x1 || echo 0x3)" \
        $(($2 * 2 + 1024))
    for c in 0 1; do
        $r bdev_malloc_create -b "Peer$c" "$2" 512 >/dev/null
        $r vhost_create_scsi_controller --cpumask "$([ "$c" = 1 ] && [ "$1" = 2 ] && echo 0x2 ||
            echo 0x1)" "vhost.$c" >/dev/null
        $r vhost_scsi_controller_add_target "vhost.$c" 0 "Peer$c" >/dev/null
    done
    wait_socket "$WORK/spdk/vhost.1"
    SOCKS=("$WORK/spdk/vhost.0" "$WORK/spdk/vhost.1")
    QARGS=("" "")
}
# scale_run NAME WHO REP "BENCH ARGS" "FILL0 FILL1": fills what each bench
# reads (FILLn MiB through bench n, untimed; 0: nothing), then runs both
# benches at once; one JSON line with their IOPS summed.
scale_run() {
    local b out=() pids=() iops fill
    read -r -a fill <<<"$5"
    for b in 0 1; do
        [ "${fill[b]}" -gt 0 ] || continue
        # shellcheck disable=SC2086
        setsid taskset -c 1 "$BENCH" --socket "${SOCKS[$b]}" ${QARGS[$b]} -q --rw write \
            --bs 1m --iodepth 4 --ios "${fill[b]}" >/dev/null ||
            { echo "bench-peer: fill failed: $1 ($2)" >&2; cat "$WORK/target.log" >&2; exit 1; }
    done
    for b in 0 1; do
        out[b]=$WORK/scale.$b.json
        # shellcheck disable=SC2086
        setsid taskset -c 0,1 "$BENCH" --socket "${SOCKS[$b]}" ${QARGS[$b]} --json -q \
            --time "$RUNTIME" $4 >"${out[$b]}" &
        pids[b]=$!
    done
    for b in 0 1; do
        wait "${pids[$b]}" ||
            { echo "bench-peer: run failed: $1 ($2)" >&2; cat "$WORK/target.log" >&2; exit 1; }
    done
    iops=$(python3 -c 'import json, sys; print(sum(json.load(open(f))["iops"] for f in sys.argv[1:]))' \
        "${out[@]}")
    printf '{"iops":%s,"who":"%s","rep":%s,"loadavg":%s}\n' "$iops" "$2" "$3" \
        "$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/$1.jsonl"
}
# scale_row NAME "DESCRIPTION" OURS_LUN OURS_POLL MALLOC_MB "BENCH ARGS"
scale_row() {
    local name=$1 desc=$2 lun=$3 poll=$4 mb=$5 bargs=$6 i who
    selected "$name" || return 0
    say "$name: $desc"
    SCALE_ROWS+=("$name")
    printf '%s\t%s\t%s\t%s\n' "$desc" \
        "taskset -c 0 (0,1) vhost-scsi-target --socket-path S --lun 0=$lun --queues 2 --threads 1 (2) --poll $poll" \
        "SPDK vhost -m 0x1 (0x3) --no-huge; two controllers (cpumask 0x1 and 0x1 (0x2)), bdev_malloc_create -b PeerN $mb 512 each" \
        "two of taskset -c 0,1 vhost-scsi-bench --socket S --time $RUNTIME $bargs (ours: --first-queue 0 and 1), each LUN written first" \
        >"$OUT/$name.desc"
    for i in $(seq "$REPS"); do
        for who in $([ $((i % 2)) = 1 ] && echo "ours-1 ours-2 spdk-1 spdk-2" ||
                     echo "spdk-2 spdk-1 ours-2 ours-1"); do
            case $who in
                ours-*) ours_n "${who#ours-}" "$lun" "$poll" ;;
                spdk-*) spdk_n "${who#spdk-}" "$mb" ;;
            esac
            scale_run "$name" "$who" "$i" "$bargs --queues 1" \
                "$([ "${who%-*}" = ours ] && echo "$((mb * 2)) 0" || echo "$mb $mb")"
            stop
        done
    done
}
scale_row ram-2t-256k "ram vs malloc, 2 queues x QD8, 256k randread, bench waits, target --poll off" \
    "ram:1G" off 512 "--rw randread --bs 256k --iodepth 8"
scale_row ram-2t-256k-pollon "ram vs malloc, 2 queues x QD8, 256k randread, bench waits, target --poll on" \
    "ram:1G" on 512 "--rw randread --bs 256k --iodepth 8"

python3 - "$OUT" "$RUNTIME" "$REPS" "${ROWS[@]}" -- "${SCALE_ROWS[@]}" >"$WORK/section.md" <<'EOF'
import datetime, json, os, platform, statistics, subprocess, sys
out, runtime, reps, rest = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
rows, scale_rows = rest[:rest.index("--")], rest[rest.index("--") + 1:]

def med(runs, who, f):
    v = [f(r) for r in runs if r["who"] == who]
    return statistics.median(v) if v else 0.0

def fmt(v, kdigits=0):  # IOPS: millions to two places, thousands to kdigits
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.{kdigits}f}k"

def cores(r):  # the target's CPU use in cores: CPU time per I/O x IOPS (or measured idle)
    b = r.get("backend", {})
    if r.get("rw") == "idle":
        return b.get("cpu_cores", 0)
    return (b.get("usr_us_per_io", 0) + b.get("sys_us_per_io", 0)) * r["iops"] / 1e6

loads = [json.loads(l)["loadavg"] for n in rows + scale_rows
         for l in open(f"{out}/{n}.jsonl")] or [0]
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
print("## SPDK peer\n")
print(f"Written by `bash scripts/bench-peer.sh` on {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, "
      f"{platform.node()}: {cpu}, {os.cpu_count()} CPUs, kernel {platform.release()}. "
      f"{reps} rounds of {runtime} s per configuration; each round runs both targets, the "
      "order swapped every round; medians.  Target on CPU 0, bench on CPU 1.  \"CPU\" is the "
      "target's CPU time over the run in cores (SPDK's reactor polls: about 1.0 whatever "
      "the load).  Load average at the start of the runs: "
      f"{min(loads)} to {max(loads)}.\n")
print("| configuration | ours (IOPS) | SPDK (IOPS) | ours/SPDK | ours CPU | SPDK CPU "
      "| ours sys us/IO | SPDK sys us/IO | host fio (IOPS) | ours/fio |")
print("|---|---|---|---|---|---|---|---|---|---|")
cmds = []
for n in rows:
    runs = [json.loads(l) for l in open(f"{out}/{n}.jsonl")]
    desc, ocmd, scmd, bcmd = open(f"{out}/{n}.desc").read().rstrip("\n").split("\t")
    oc, sc = med(runs, "ours", cores), med(runs, "spdk", cores)
    if runs[0].get("rw") == "idle":
        print(f"| {desc} | - | - | - | {oc:.3f} | {sc:.3f} | - | - | - | - |")
        cmds.append(f"- {n}: `{ocmd}` / {scmd} / `{bcmd}`")
        continue
    o, s = med(runs, "ours", lambda r: r["iops"]), med(runs, "spdk", lambda r: r["iops"])
    sys_us = lambda r: r.get("backend", {}).get("sys_us_per_io", 0)
    os_, ss = med(runs, "ours", sys_us), med(runs, "spdk", sys_us)
    f = med(runs, "fio", lambda r: r["iops"])
    fcol = f"{fmt(f)} | {o / f:.2f}" if f else "- | -"
    print(f"| {desc} | {fmt(o)} | {fmt(s)} | {o / s if s else 0:.2f} | {oc:.2f} | {sc:.2f} "
          f"| {os_:.3f} | {ss:.3f} | {fcol} |")
    cmds.append(f"- {n}: `{ocmd}` / {scmd} / `{bcmd}`" +
                (" / host `fio --direct=1 --ioengine=io_uring --bs=4k` (same pattern and depth, CPU 1)"
                 if f else ""))
if scale_rows:
    print("\nTwo threads against one (rows above: one thread, one CPU). Each run has "
          "two bench processes, one queue each, on CPUs 0-1 with the target: IOPS of both "
          "summed, medians of the rounds; the order of the four runs reversed every round; "
          "in the commands, parentheses give the two-thread and two-reactor runs.\n")
    print("| configuration | ours 1 thread | ours 2 threads | ours 2/1 | SPDK 1 reactor "
          "| SPDK 2 reactors | SPDK 2/1 | ours/SPDK, 2 each |")
    print("|---|---|---|---|---|---|---|---|")
for n in scale_rows:
    runs = [json.loads(l) for l in open(f"{out}/{n}.jsonl")]
    desc, ocmd, scmd, bcmd = open(f"{out}/{n}.desc").read().rstrip("\n").split("\t")
    o1, o2, s1, s2 = (med(runs, w, lambda r: r["iops"]) for w in ("ours-1", "ours-2", "spdk-1", "spdk-2"))
    print(f"| {desc} | {fmt(o1, 1)} | {fmt(o2, 1)} | {o2 / o1 if o1 else 0:.2f} | {fmt(s1, 1)} | {fmt(s2, 1)} "
          f"| {s2 / s1 if s1 else 0:.2f} | {o2 / s2 if s2 else 0:.2f} |")
    cmds.append(f"- {n}: `{ocmd}` / {scmd} / `{bcmd}`")
print("\nCommands (S: the socket, PID: the target's pid):\n")
print("\n".join(cmds))
EOF
write_section "$WORK/section.md"
say "done: the SPDK peer section of $DOC"

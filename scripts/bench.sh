#!/bin/bash
# `make bench`: the performance matrix.  Builds an optimised tree,
# then runs vhost-scsi-bench against vhost-scsi-target (null, page-cached
# file and O_DIRECT loop-device LUNs; polling and interrupt modes; one and
# two threads; with and without two nice'd busy loops), fio directly on the
# host for the backend's own limit, and reads the guest comparison from
# `make demo` (out/demo-results.txt), and (g8) the side-by-side comparison
# with SPDK's vhost of scripts/bench-peer.sh.  Every configuration runs REPS times
# for RUNTIME seconds; the median run is reported.  Writes
# docs/performance.md (figures, goal verdicts, exact commands, machine) and
# keeps the raw JSON lines in out/bench/.  Not part of `make check`: it
# asserts nothing, it measures.
#
# Environment: BENCH_BUILD (default build-bench, buildtype release with
# link-time optimisation, as the Debian package is built),
# BENCH_RUNTIME (seconds per run, default 5), BENCH_REPS (default 3),
# BENCH_DOC (default docs/performance.md), BENCH_SKIP_BUILD=1,
# BENCH_ONLY="g1 g2 ..." to run a subset (the document then lists only those).
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
ONLY=${BENCH_ONLY:-g1 g2 g3 g4 g5 g6 g7 g8}
OUT=$SRC/out/bench
say() { echo "== $*" >&2; }
want() { [[ " $ONLY " == *" $1 "* ]]; }

if [ -z "${BENCH_SKIP_BUILD:-}" ]; then
    say "building (release) in $BUILD"
    [ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" -Dbuildtype=release -Db_lto=true >/dev/null
    ninja -C "$BUILD" tools/vhost-scsi-target tools/vhost-scsi-bench >/dev/null
fi
TARGET=$BUILD/tools/vhost-scsi-target
BENCH=$BUILD/tools/vhost-scsi-bench
for b in "$TARGET" "$BENCH"; do
    [ -x "$b" ] || { echo "bench: $b missing" >&2; exit 1; }
done
command -v fio >/dev/null || { echo "bench: fio missing (make deps)" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT"
WORK=$(mktemp -d "$SRC/out/bench-work.XXXXXX")
TPID=""
LOOP=""
LOADPIDS=()
stop_target() {
    if [ -n "$TPID" ] && kill -0 "$TPID" 2>/dev/null; then
        kill "$TPID" 2>/dev/null || true
        wait "$TPID" 2>/dev/null || true
    fi
    TPID=""
}
stop_load() {
    for p in "${LOADPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${LOADPIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    LOADPIDS=()
}
cleanup() {
    stop_target
    stop_load
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# With autogroup scheduling (Debian's default) CPU is shared per session,
# so a target and a bench in this script's session would split one share
# against the rest of the host: each gets its own session, as a service
# and its clients would.  The load runs (g4) keep everything in one session
# so that the busy loops' nice 10 means what it says.
ISOLATE=setsid
SOCK=$WORK/vs.sock
start_target() {  # start_target ARGS... ; sets TPID
    rm -f "$SOCK"
    $ISOLATE "$TARGET" --socket-path "$SOCK" "$@" >"$WORK/target.log" 2>&1 &
    TPID=$!
    for _ in $(seq 200); do
        [ -S "$SOCK" ] && return 0
        kill -0 "$TPID" 2>/dev/null || break
        sleep 0.05
    done
    echo "bench: target did not start: $*" >&2
    cat "$WORK/target.log" >&2
    exit 1
}

# Two busy loops, one per core, at nice 10; their CPU ticks show whether
# they were starved.
start_load() {
    for cpu in 0 1; do
        nice -n 10 taskset -c "$cpu" bash -c 'while :; do :; done' &
        LOADPIDS+=($!)
    done
}
load_ticks() {  # sum of utime+stime of the busy loops
    local t=0 p f
    for p in "${LOADPIDS[@]}"; do
        f=$(sed 's/.*) //' "/proc/$p/stat")
        t=$((t + $(echo "$f" | awk '{print $12 + $13}')))
    done
    echo "$t"
}

# run NAME "TARGET ARGS" "BENCH ARGS" [load]: REPS runs, one JSON line each
# in $OUT/NAME.jsonl (the bench's object plus the command lines, the load
# average before the run, the target's RSS and the busy loops' CPU share).
run() {
    local name=$1 targs=$2 bargs=$3 load=${4:-}
    local i j rss t0 t1 l0 l1
    say "$name: target $targs | bench $bargs ${load:+(under load)}"
    for i in $(seq "$REPS"); do
        # shellcheck disable=SC2086
        start_target $targs
        [ -n "$load" ] && start_load
        t0=$(date +%s%N)
        l0=$([ -n "$load" ] && load_ticks || echo 0)
        local la
        la=$(cut -d' ' -f1 /proc/loadavg)
        # shellcheck disable=SC2086
        if ! j=$($ISOLATE "$BENCH" --socket "$SOCK" --json -q --time "$RUNTIME" --pid "$TPID" $bargs); then
            echo "bench: run failed: $name" >&2
            cat "$WORK/target.log" >&2
            exit 1
        fi
        l1=$([ -n "$load" ] && load_ticks || echo 0)
        t1=$(date +%s%N)
        rss=$(awk '/^VmHWM:/ {print $2}' "/proc/$TPID/status")
        [ -n "$load" ] && stop_load
        stop_target
        local share
        share=$(awk -v d=$((l1 - l0)) -v hz="$(getconf CLK_TCK)" -v ns=$((t1 - t0)) \
            'BEGIN { printf "%.3f", d / hz / (ns / 1e9) / 2 }')
        printf '%s\n' "${j%\}}"',"name":"'"$name"'","rep":'"$i"',"loadavg":'"$la"',"target_hwm_kib":'"$rss"',"load_cpu_share":'"$share"',"target_cmd":"vhost-scsi-target --socket-path S '"$targs"'","bench_cmd":"vhost-scsi-bench --socket S --time '"$RUNTIME"' --pid PID '"$bargs"'"}' \
            >>"$OUT/$name.jsonl"
    done
}

# run_pair NAME "TARGET ARGS" "BENCH ARGS": two bench processes at once,
# each on its own request queue (--first-queue 0 and 1) of its own
# connection, so the load generator is two threads, not one.  One JSON line
# per run: IOPS summed, latency percentiles the worse of the two.
run_pair() {
    local name=$1 targs=$2 bargs=$3 i
    say "$name: target $targs | 2 x bench $bargs"
    for i in $(seq "$REPS"); do
        # shellcheck disable=SC2086
        start_target $targs
        local la
        la=$(cut -d' ' -f1 /proc/loadavg)
        # shellcheck disable=SC2086
        $ISOLATE "$BENCH" --socket "$SOCK" --json -q --time "$RUNTIME" --first-queue 0 \
            $bargs >"$WORK/b0.json" &
        local p0=$!
        # shellcheck disable=SC2086
        if ! $ISOLATE "$BENCH" --socket "$SOCK" --json -q --time "$RUNTIME" --first-queue 1 \
            $bargs >"$WORK/b1.json" || ! wait "$p0"; then
            echo "bench: run failed: $name" >&2
            exit 1
        fi
        stop_target
        python3 - "$WORK/b0.json" "$WORK/b1.json" "$name" "$i" "$la" \
            "vhost-scsi-target --socket-path S $targs" \
            "2 x vhost-scsi-bench --socket S --time $RUNTIME $bargs --first-queue 0|1" \
            >>"$OUT/$name.jsonl" <<'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print(json.dumps({"name": sys.argv[3], "rep": int(sys.argv[4]), "loadavg": float(sys.argv[5]),
                  "iops": a["iops"] + b["iops"],
                  "lat_us": {k: max(a["lat_us"][k], b["lat_us"][k]) for k in a["lat_us"]},
                  "interrupts_per_io": (a["interrupts_per_io"] + b["interrupts_per_io"]) / 2,
                  "kicks_per_io": (a["kicks_per_io"] + b["kicks_per_io"]) / 2,
                  "target_cmd": sys.argv[6], "bench_cmd": sys.argv[7]}))
EOF
    done
}

# fio NAME FILE "FIO ARGS": the backend's own limit, directly on the host.
run_fio() {
    local name=$1 file=$2 fargs=$3 i
    say "$name: fio $fargs"
    for i in $(seq "$REPS"); do
        # shellcheck disable=SC2086
        fio --name=host --filename="$file" --ioengine=io_uring --time_based \
            --runtime="$RUNTIME" --output-format=json $fargs >"$WORK/fio.json"
        python3 - "$WORK/fio.json" "$name" "$i" "fio --name=host --filename=F --ioengine=io_uring --time_based --runtime=$RUNTIME $fargs" >>"$OUT/$name.jsonl" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["jobs"][0]["read"]
p = r.get("clat_ns", {}).get("percentile", {})
print(json.dumps({"name": sys.argv[2], "rep": int(sys.argv[3]), "iops": r["iops"],
                  "lat_us": {"p99": p.get("99.000000", 0) / 1e3},
                  "fio_cmd": sys.argv[4]}))
EOF
    done
}

NULL="--lun 0=null:1G"
RW="--rw randread --bs 4k"

if want g1; then
    run g1-poll "$NULL --queues 1 --threads 1 --poll on" "$RW --iodepth 32 --poll"
    run g1-adaptive "$NULL --queues 1 --threads 1 --poll adaptive" "$RW --iodepth 32 --poll"
fi
if want g2; then
    run g2-irq-qd32 "$NULL --queues 1 --threads 1 --poll off" "$RW --iodepth 32"
    run g2-irq-qd1 "$NULL --queues 1 --threads 1 --poll off" "$RW --iodepth 1"
fi
if want g3; then
    IMG=$WORK/cached.img
    say "g3: 1 GiB file, read into the page cache"
    dd if=/dev/urandom of="$IMG" bs=1M count=1024 status=none
    cat "$IMG" >/dev/null
    run_fio g3-fio-cached "$IMG" "--rw=randread --bs=4k --iodepth=32 --direct=0"
    run g3-cached "--lun 0=file:$IMG --queues 1 --threads 1 --poll off" "$RW --iodepth 32"
    run g3-cached-poll "--lun 0=file:$IMG --queues 1 --threads 1 --poll adaptive" \
        "$RW --iodepth 32 --poll"
    if LOOP=$(losetup -f --show --direct-io=on "$IMG" 2>/dev/null); then
        run_fio g3-fio-direct "$LOOP" "--rw=randread --bs=4k --iodepth=32 --direct=1"
        run g3-direct "--lun 0=file:$LOOP,direct --queues 1 --threads 1 --poll off" \
            "$RW --iodepth 32"
        run g3-direct-poll "--lun 0=file:$LOOP,direct --queues 1 --threads 1 --poll adaptive" \
            "$RW --iodepth 32 --poll"
        losetup -d "$LOOP" || true
        LOOP=""
    else
        say "g3: no loop device (losetup failed): O_DIRECT block device runs skipped"
    fi
    rm -f "$IMG"
fi
if want g4; then
    ISOLATE=""
    run g4-noload "$NULL --queues 1 --threads 1 --poll adaptive" "$RW --iodepth 32"
    run g4-load "$NULL --queues 1 --threads 1 --poll adaptive" "$RW --iodepth 32" load
    run g4-noload-off "$NULL --queues 1 --threads 1 --poll off" "$RW --iodepth 32"
    run g4-load-off "$NULL --queues 1 --threads 1 --poll off" "$RW --iodepth 32" load
    # The same with the driver polling for completions (a guest with
    # io_poll, or SPDK's virtio driver): no wake-up on either side.
    run g4-noload-poll "$NULL --queues 1 --threads 1 --poll adaptive" "$RW --iodepth 32 --poll"
    run g4-load-poll "$NULL --queues 1 --threads 1 --poll adaptive" "$RW --iodepth 32 --poll" load
    ISOLATE=setsid
fi
if want g6; then
    run g6-1thread "$NULL --queues 2 --threads 1 --poll off" "$RW --iodepth 32 --queues 2"
    run g6-2threads "$NULL --queues 2 --threads 2 --poll off" "$RW --iodepth 32 --queues 2"
    run_pair g6-pair-1thread "$NULL --queues 2 --threads 1 --poll off" "$RW --iodepth 32"
    run_pair g6-pair-2threads "$NULL --queues 2 --threads 2 --poll off" "$RW --iodepth 32"
    run_pair g6-pair-1thread-qd1 "$NULL --queues 2 --threads 1 --poll off" "$RW --iodepth 1"
    run_pair g6-pair-2threads-qd1 "$NULL --queues 2 --threads 2 --poll off" "$RW --iodepth 1"
fi
if want g7; then
    IMG=$WORK/rss.img
    truncate -s 1G "$IMG"
    run g7-rss "--lun 0=file:$IMG --queues 4 --threads 2 --poll off" \
        "--rw randwrite --bs 4k --iodepth 32 --queues 4"
    rm -f "$IMG"
fi
if want g5 && [ -f "$SRC/out/demo-results.txt" ]; then
    cp "$SRC/out/demo-results.txt" "$OUT/g5-demo-results.txt"
fi

say "writing $DOC"
python3 "$SRC/scripts/bench-report.py" "$OUT" "$DOC" "$RUNTIME" "$REPS"
# g8, the SPDK peer: its own section below the analysis marker.
if want g8; then
    BENCH_BUILD=$BUILD BENCH_DOC=$DOC bash "$SRC/scripts/bench-peer.sh"
fi
say "done: $DOC"

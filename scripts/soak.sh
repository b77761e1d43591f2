#!/bin/bash
# The soak run (`make soak`, not part of make check): one ASan+UBSan build of
# vhost-scsi-target (build-asan/) serves a RAM, a file and (with tgt
# installed) an iSCSI LUN for SOAK_TIME seconds (default 600) while a
# randomised, seeded mix of actions runs against it:
#   verify       vhost-scsi-bench --verify on a random LUN (a new front-end each time)
#   load         a random --rw mode for 1-4 s, sometimes with --indirect, --poll
#                or --dirty-log
#   kill-fe      a front-end killed (SIGKILL) mid-I/O, then a verify
#   neighbour    --rw hostile next to a verify on another queue and LUN
#   hotplug      lun add / verify / lun resize / lun remove through vhost-scsi-ctl,
#                under a verify on another LUN
#   backend      backend add / lun map / lun unmap / backend remove, qos set
#   ctl-junk     garbage, a too-long line and a half-closed request on the control
#                socket, then a check that it still answers
#   iscsi-restart  the private tgtd killed and restarted under load, then a
#                verify on the iSCSI LUN once its session is back
#   protocol     one random case of the TMF (ABORT TASK, LUN RESET, I_T NEXUS
#                RESET), hostile-front-end and live-LUN protocol tests, each
#                with its own ASan daemon
# Every action runs under a watchdog (SOAK_WATCHDOG s, default 120, five
# times that for a protocol case: an action that makes no progress for
# that long is a hang).  The run fails on
# a verify error, a failed action, a sanitizer report, a daemon that died,
# or a daemon that does not exit cleanly (LeakSanitizer) on SIGTERM at the
# end.  It prints the seed first (SOAK_SEED=N replays the same sequence of
# actions; timing still differs) and a count per action at the end.  Work
# files are in out/soak/ (the daemon's log: out/soak/daemon.log).
#   make soak SOAK_TIME=1200 [SOAK_SEED=N]
set -uo pipefail
cd "$(dirname "$0")/.."
time=${SOAK_TIME:-600}
watchdog=${SOAK_WATCHDOG:-120}
seed=${SOAK_SEED:-$(( $(od -An -N2 -tu2 /dev/urandom) ))}
build=${ASAN_BUILD:-build-asan}
RANDOM=$seed
echo "soak: seed $seed (SOAK_SEED=$seed replays it), ${time}s, watchdog ${watchdog}s"

[ -f "$build/build.ninja" ] || bash scripts/build.sh "$build" asan >/dev/null
ninja -C "$build" >/dev/null || { echo "soak: build failed"; exit 1; }
target=$build/tools/vhost-scsi-target bench=$build/tools/vhost-scsi-bench
ctl=$build/tools/vhost-scsi-ctl
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# libiscsi 1.19 leaks its connect task (see tests/iscsi/lsan.supp).
export LSAN_OPTIONS=suppressions=$PWD/tests/iscsi/lsan.supp
export VHOST_SCSI_TARGET=$PWD/$target VHOST_SCSI_BENCH=$PWD/$bench VHOST_SCSI_CTL=$PWD/$ctl

dir=$PWD/out/soak
rm -rf "$dir" && mkdir -p "$dir"
sock=$dir/vs.sock csock=$dir/ctl.sock log=$dir/daemon.log
declare -A count=()
failed=0 daemon= tgt_pid=
iqn=iqn.2026-12.org.vhost-scsi:soak
# A free portal port, and a control port tgtadm takes (<= 32767); not from
# RANDOM, which only the actions draw from.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
tctl=$(python3 -c 'import random; print(random.randint(10000, 32767))')

fail() { echo "soak: FAIL: $*"; failed=1; }

# Runs "$@" under the watchdog (or $limit s); its output goes to $dir/last.log.
guarded() { timeout -k 5 "${limit:-$watchdog}" "$@" > "$dir/last.log" 2>&1; }

ctlc() { guarded "$ctl" target --control "$csock" --timeout-ms $((watchdog * 1000)) "$@"; }

tgt_start() {
    tests/iscsi/tgt.sh run "$port" "$tctl" > "$dir/tgtd.log" 2>&1 &
    tgt_pid=$!
    tests/iscsi/tgt.sh setup "$tctl" 1 "$iqn" "$dir/iscsi.img" >> "$dir/tgtd.log" 2>&1
}

tgt_stop() {
    [ -n "$tgt_pid" ] || return 0
    kill -9 "$tgt_pid" 2>/dev/null; wait "$tgt_pid" 2>/dev/null; tgt_pid=
}

cleanup() {
    tgt_stop
    [ -z "$daemon" ] || { kill -9 "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; }
}
trap cleanup EXIT

luns="0:0 0:1"
truncate -s 64M "$dir/disk.img"
args=(--socket-path "$sock" --control "$csock" --queues 4 --threads 2
      --lun 0:0=ram:64M --lun "0:1=file:$dir/disk.img")
if command -v tgtd >/dev/null && command -v tgtadm >/dev/null; then
    truncate -s 64M "$dir/iscsi.img"
    if tgt_start; then
        args+=(--lun "0:2=iscsi://127.0.0.1:$port/$iqn/1")
        luns="$luns 0:2"
    else
        echo "soak: tgtd did not start (see $dir/tgtd.log): no iSCSI LUN"; tgt_stop
    fi
else
    echo "soak: tgt not installed: no iSCSI LUN, no iscsi-restart"
fi
"$target" "${args[@]}" > "$log" 2>&1 &
daemon=$!
for _ in $(seq 200); do
    [ -S "$sock" ] && [ -S "$csock" ] && break
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.1
done
[ -S "$sock" ] && [ -S "$csock" ] || { echo "soak: the daemon did not start:"; tail "$log"; exit 1; }

# pick VAR "A B C": one of them at random into VAR (not $(...): a subshell's
# RANDOM does not advance ours, so the seed would not replay the run).
pick() { local -a _pick=($2); printf -v "$1" '%s' "${_pick[RANDOM % ${#_pick[@]}]}"; }

# bench ARGS...: a front-end run of its own, under the watchdog.
run_bench() { guarded "$bench" --socket "$sock" -q "$@"; }

# verify LUN [QUEUE]: at most iodepth (32) blocks of at most 64k from LBA 0.
verify() {
    local lun=$1 q=${2:-0} bs
    pick bs "512 4k 64k"
    run_bench --verify --ios $(( 64 + RANDOM % 1024 )) --bs "$bs" \
        --iodepth $(( 1 + RANDOM % 32 )) --lun "$lun" --first-queue "$q" ||
        { fail "verify on $lun: $(grep -m3 -E 'mismatch|error|fail' "$dir/last.log")"; return 1; }
}

act_verify() { local lun; pick lun "$luns"; verify "$lun" "$(( RANDOM % 4 ))"; }

act_load() {
    local extra rw bs lun
    pick extra "-- --indirect --poll --dirty-log --no-event-idx"
    [ "$extra" = -- ] && extra=
    pick rw "read write randread randwrite rw"
    pick bs "512 4k 128k"
    pick lun "$luns"
    run_bench --rw "$rw" --time $(( 1 + RANDOM % 4 )) --bs "$bs" \
        --iodepth $(( 1 + RANDOM % 64 )) --queues $(( 1 + RANDOM % 2 )) --lun "$lun" $extra ||
        fail "load: $(tail -2 "$dir/last.log")"
}

# A writer killed mid-I/O; then a verify on another LUN (the dead one's
# writes may still be landing on its own) shows the daemon serves on.
act_kill_fe() {
    local lun other
    pick lun "$luns"
    other_lun other "$lun"
    "$bench" --socket "$sock" -q --rw randwrite --time 30 --iodepth 32 --lun "$lun" \
        --first-queue 1 > /dev/null 2>&1 &
    local pid=$!
    sleep "0.$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
    kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    verify "$other" 2
}

# other_lun VAR LUN: a LUN other than LUN into VAR.
other_lun() {
    local -a _rest=() _l
    for _l in $luns; do [ "$_l" = "$2" ] || _rest+=("$_l"); done
    printf -v "$1" '%s' "${_rest[RANDOM % ${#_rest[@]}]}"
}

# The hostile one writes from LBA 0 too: the verify is on another LUN.  On
# the RAM LUN, 4 deep: tgt answers some of its commands INVALID COMMAND
# OPERATION CODE, and whole-LUN WRITE SAMEs written out to a file or a
# remote, 16 at a time, can take more than the bench's 5 s without a
# completion on a loaded machine (load 12 on 2 cores did).
act_neighbour() {
    local a=0:0 b
    other_lun b "$a"
    "$bench" --socket "$sock" -q --rw hostile --time 3 --bs 64k --iodepth 4 --lun "$a" \
        --first-queue 3 > "$dir/hostile.log" 2>&1 &
    local pid=$!
    verify "$b" 0
    timeout -k 5 "$watchdog" tail --pid="$pid" -f /dev/null ||
        fail "neighbour: the hostile front-end did not finish"
    wait "$pid" || fail "neighbour: hostile bench: $(tail -2 "$dir/hostile.log")"
}

act_hotplug() {
    local id=0:$(( 8 + RANDOM % 4 )) other
    pick other "$luns"
    # A file LUN: RAM cannot grow.
    truncate -s $(( 4 + RANDOM % 8 ))M "$dir/hot.img"
    ctlc lun add "$id=file:$dir/hot.img" || { fail "lun add $id: $(cat "$dir/last.log")"; return; }
    "$bench" --socket "$sock" -q --verify --ios 2000 --lun "$other" --first-queue 1 \
        > "$dir/under.log" 2>&1 &
    local pid=$!
    verify "$id" 0
    ctlc lun resize "$id" "$(( 16 + RANDOM % 16 ))M" || fail "lun resize $id: $(cat "$dir/last.log")"
    verify "$id" 2
    ctlc lun remove "$id" || fail "lun remove $id: $(cat "$dir/last.log")"
    rm -f "$dir/hot.img"
    timeout -k 5 "$watchdog" tail --pid="$pid" -f /dev/null
    wait "$pid" || fail "verify on $other under hotplug: $(tail -2 "$dir/under.log")"
}

act_backend() {
    local name=b$RANDOM id=0:$(( 12 + RANDOM % 4 )) bs
    pick bs "512 4096"
    ctlc backend add "$name" "null:1G,block-size=$bs" &&
        ctlc lun map "$id" "$name" &&
        ctlc qos set "$name" --iops $(( 1000 + RANDOM )) &&
        run_bench --rw randread --time 1 --lun "$id" &&
        ctlc lun unmap "$id" && ctlc backend remove "$name" &&
        ctlc stats && ctlc backend list ||
        fail "backend cycle on $name at $id: $(tail -3 "$dir/last.log")"
}

act_ctl_junk() {
    python3 - "$csock" <<'EOF' || fail "ctl-junk: $(cat "$dir/last.log" 2>/dev/null)"
import os, socket, sys
def talk(data, shut=True):
    s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(sys.argv[1])
    try:
        s.sendall(data)
        if shut: s.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        pass   # dropped for a line too long: what it said before is read below
    out = b""
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            break
        if not b: break
        out += b
    s.close(); return out
talk(os.urandom(4096) + b"\n")
talk(b'{"jsonrpc":"2.0","method":"lun-list","id":1,"params":{"x":"' + b"y" * (2 << 20) + b'"}}\n')
talk(b'{"jsonrpc":"2.0","method":"stats","id":2}')   # no newline: never a request
talk(b'\xff\xfe{"jsonrpc":"2.0"}\n[1,2,[3]]\n{"id":{"a":1}}\n')
r = talk(b'{"jsonrpc":"2.0","method":"version","id":7}\n')
sys.exit(0 if b'"id":7' in r and b'"result"' in r else 1)
EOF
}

act_iscsi_restart() {
    local ok=0
    "$bench" --socket "$sock" -q --rw randrw --time 5 --iodepth 16 --lun 0:2 --first-queue 1 \
        > /dev/null 2>&1 &
    local pid=$!
    sleep "0.$(( RANDOM % 10 ))"
    tgt_stop
    tgt_start || { fail "iscsi-restart: tgtd did not come back (see $dir/tgtd.log)"; return; }
    wait "$pid" 2>/dev/null    # its I/O may fail (BUSY, NOT READY): the daemon must not
    # The session logs in again by itself; bounded: at most 10 tries.
    for _ in $(seq 10); do
        if run_bench --verify --ios 256 --lun 0:2; then ok=1; break; fi
        count[iscsi-retry]=$(( ${count[iscsi-retry]:-0} + 1 ))
        sleep 1
    done
    [ $ok = 1 ] || fail "iscsi-restart: no verified I/O on 0:2 after tgtd came back: $(tail -2 "$dir/last.log")"
}

# Protocol cases: gtester paths of the TMF, hostile and live-LUN tests.
protocol_cases=()
for t in tmf-isolation-test hostile-test live-lun-test target-test; do
    bin=$build/tests/protocol/$t
    [ -x "$bin" ] || continue
    while read -r p; do
        case "$t:$p" in
        target-test:*reset*|target-test:*abort*|target-test:*tmf*|target-test:*nexus*|\
        hostile-test:/hostile/neighbour) ;;  # a p99 bound, for a quiet machine
        tmf-isolation-test:*|hostile-test:*|live-lun-test:*) protocol_cases+=("$t $p") ;;
        esac
    done < <("$bin" -l 2>/dev/null | grep '^/')
done

act_protocol() {
    [ ${#protocol_cases[@]} -gt 0 ] || return 0
    local c=${protocol_cases[RANDOM % ${#protocol_cases[@]}]}
    local t=${c%% *} p=${c#* }
    local rc
    # A case bounds its own waits; /hostile/neighbour plays every attack in
    # turn, 65 s on a quiet machine and more than 120 s at load 12.
    limit=$(( watchdog * 5 )) guarded "$build/tests/protocol/$t" -p "$p" --tap
    rc=$?
    [ $rc = 0 ] || { fail "protocol case $t $p: exit status $rc (124: the watchdog)"
                     grep -E "not ok|ERROR|FAIL|Sanitizer" "$dir/last.log" | head -5; }
    grep -q "^not ok" "$dir/last.log" && fail "protocol case $t $p: $(grep -m1 '^not ok' "$dir/last.log")"
    echo "$t $p" >> "$dir/protocol-cases.txt"
}

actions="verify verify load load kill_fe neighbour hotplug backend ctl_junk protocol protocol"
[[ " $luns " == *" 0:2 "* ]] && actions="$actions iscsi_restart"
start=$SECONDS
while [ $(( SECONDS - start )) -lt "$time" ] && [ $failed = 0 ]; do
    pick a "$actions"
    act_$a
    count[$a]=$(( ${count[$a]:-0} + 1 ))
    if ! kill -0 "$daemon" 2>/dev/null; then
        fail "the daemon died during $a:"; tail -20 "$log"; daemon=; break
    fi
    if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$log"; then
        fail "sanitizer report during $a:"; grep -A20 -E "ERROR: |runtime error:" "$log" | head -40
    fi
done
if [ -n "$daemon" ]; then
    kill -TERM "$daemon"
    if ! timeout "$watchdog" tail --pid="$daemon" -f /dev/null; then
        fail "the daemon did not exit within ${watchdog}s of SIGTERM"
    fi
    wait "$daemon"; rc=$?
    daemon=
    [ $rc = 0 ] || { fail "the daemon exited with $rc at the end:"; grep -A20 -E "ERROR: |runtime error:" "$log" | head -40; }
fi
summary=$(for a in "${!count[@]}"; do echo "$a=${count[$a]}"; done | sort | tr '\n' ' ')
echo "soak: $(( SECONDS - start ))s, seed $seed: $summary"
[ $failed = 0 ] && echo "soak: PASS" || { echo "soak: FAILED (seed $seed; logs in $dir)"; exit 1; }

#!/bin/bash
# Live migration of a Linux guest whose disks vhost-scsi-target serves: QEMU
# processes on this machine under TCG, each destination started with
# `-incoming tcp:127.0.0.1:PORT` (and -S) with the same vhost-user-scsi-pci
# devices on the same daemon sockets.  The guest
# (tests/guest/migration-guest.sh) keeps fio going and asks for each
# migration on its console; the host starts the destination, runs `migrate`
# through QMP (tests/guest/qmp.py), waits for it to complete, tells the
# guest through a mailbox LUN while the destination is still paused,
# resumes it and quits the source.  One guest, one boot, all cases (a boot
# and a migration under TCG cost a minute each on a loaded machine):
#   migration-basic     fio randwrite + crc32c verify on a file LUN through
#                       every migration; the host then verifies the file;
#   migration-direct    the same, at the same time, on a `direct` file LUN;
#   migration-pingpong  --migrations N (default 5) migrations, each to a new
#                       QEMU process and port, all under that load;
#   migration-heavy-read  migration 2 is held after QEMU's first complete
#                       pass over RAM (hold_reads below) while the guest
#                       reads a LUN into its page cache, then completes; the
#                       guest verifies it from the cache on the destination
#                       (data-in pages a missing log bit leaves stale: QEMU
#                       sent them before the read, only the log re-sends);
#   migration-heavy-read-unlogged  the same LUN on a second daemon run with
#                       the test hook VHOST_SCSI_TEST_FAULT=log-skip-data-in,
#                       in the same migration: its check must fail.
# Prints TAP; exits non-zero on failure.
#
# Usage: tests/guest/migration-test.sh [options]
#   --migrations N       migrations (default 5; the heavy read, and the
#                        daemon with the test hook, need 2 or more)
#   --load write|none    the guest's load (none: no fio, for the benchmark)
#   --peer target|qemu   back-end: vhost-scsi-target (default) or QEMU's own
#                        virtio-scsi-pci + scsi-hd on the same files (checks
#                        the test itself; scripts/bench-migration.sh)
#   --mem SIZE, --smp N  guest RAM (default 1G) and vCPUs (default 1)
#   --packed             the devices with packed=on (packed virtqueues: the
#                        ring state travels in GET/SET_VRING_BASE)
#   --append ARGS        more kernel arguments (e.g. loglevel=7 to debug)
#   --build-dir DIR      meson build dir (default $BUILD_DIR or build)
#   --keep               keep the work directory (logs, images)
#   --console            show the guests' consoles while they run
# QEMU (and QEMU_DATADIR) select another QEMU, as for run-qemu.sh.
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
MIGRATIONS=5 LOAD=write PEER=target MEM=1G SMP=1 EXTRA_APPEND="" PACKED=0
guest_extra_option() {
    case "$1" in
    --migrations) MIGRATIONS=$2; SHIFTED=2 ;;
    --load) LOAD=$2; SHIFTED=2 ;;
    --peer) PEER=$2; SHIFTED=2 ;;
    --mem) MEM=$2; SHIFTED=2 ;;
    --smp) SMP=$2; SHIFTED=2 ;;
    --append) EXTRA_APPEND=$2; SHIFTED=2 ;;
    --packed) PACKED=1; SHIFTED=1 ;;
    esac
}
guest_parse_args "$@"
case "$PEER" in target|qemu) ;; *) echo "--peer must be target or qemu" >&2; usage ;; esac
case "$LOAD" in write|none) ;; *) echo "--load must be write or none" >&2; usage ;; esac
# fio's write jobs cycle over FIO_SIZE; the heavy read covers HEAVY_SIZE.
FIO_SIZE=32M HEAVY_SIZE=64M LUN_BYTES=$((128 << 20))
# Each QEMU process is bounded by this; each migration by MIGRATE_TIMEOUT.
QEMU_TIMEOUT=$((240 + 150 * MIGRATIONS)) WANT_TIMEOUT=180 MIGRATE_TIMEOUT=180
QMP=$HERE/qmp.py

declare -a QPIDS=()
TARGET_PID="" HOOKED_PID=""
guest_cleanup_extra() {
    local i p
    for i in "${!QPIDS[@]}"; do
        kill -0 "${QPIDS[$i]}" 2>/dev/null || continue
        "$QMP" "$WORK/qmp$i.sock" --timeout 5 execute quit >/dev/null 2>&1
        timeout 10 tail -f --pid="${QPIDS[$i]}" /dev/null || kill "${QPIDS[$i]}" 2>/dev/null
        wait "${QPIDS[$i]}" 2>/dev/null
    done
    for p in $TARGET_PID $HOOKED_PID; do
        if kill -0 "$p" 2>/dev/null; then kill "$p"; wait "$p" 2>/dev/null; fi
    done
}
guest_work_dir migration

IMG_DIR=${GUEST_IMAGE_DIR:-$BUILD_DIR/guest-images}
INITRD=$IMG_DIR/migration.cpio
guest_initramfs "$INITRD" --init-script "$HERE/migration-guest.sh"
note "QEMU: $("${QEMU:-qemu-system-x86_64}" --version | head -n 1); load: $(cut -d' ' -f1-3 /proc/loadavg)"

# host_fio DESC FILE ARGS...: fio on FILE, pass/fail on status and errors.
host_fio() {
    local desc=$1 file=$2 rc errs
    shift 2
    fio --filename="$file" --ioengine=psync --verify=crc32c --verify_state_save=0 \
        --output-format=terse --terse-version=3 "$@" >"$WORK/host-fio.out" 2>&1
    rc=$? errs=$(grep -c 'verify: bad\|verify failed' "$WORK/host-fio.out")
    if [ "$rc" = 0 ] && [ "$errs" = 0 ]; then pass "$desc"
    else fail "$desc (fio status $rc, $errs verify errors)"; head -n 20 "$WORK/host-fio.out" | sed 's/^/# /'; fi
}
PATTERN=(--name=pattern --rw=write --bs=64k --size="$HEAVY_SIZE")

for f in lun0 lun2 lun3 lun5; do truncate -s "$LUN_BYTES" "$WORK/$f.img"; done
truncate -s 1M "$WORK/mbox.img"
# The heavy read (and the daemon with the test hook) is migration 2's.
HEAVY=$([ "$MIGRATIONS" -ge 2 ] && echo 1 || echo 0)
if [ "$HEAVY" = 1 ]; then
    for f in lun3 lun5; do
        host_fio "migration-heavy-read: host wrote (and verified) fio's crc32c pattern on $f" \
            "$WORK/$f.img" "${PATTERN[@]}"
    done
else
    skip "migration-heavy-read" "needs --migrations 2 or more"
fi

# mbox K STATE: the mailbox line the guest polls (migration-guest.sh).
mbox() {
    { printf 'MIG %s %s\n' "$1" "$2"; head -c 4096 /dev/zero; } | head -c 4096 |
        dd of="$WORK/mbox.img" conv=notrunc status=none
}
mbox 0 done

UNLOGGED=0
if [ "$PEER" = target ]; then
    TARGET=$BUILD_DIR/tools/vhost-scsi-target
    "$TARGET" --socket-path "$WORK/vhost-scsi.sock" --lun "0=file:$WORK/lun0.img" \
        --lun "1=file:$WORK/mbox.img" --lun "2=file:$WORK/lun2.img,direct" \
        --lun "3=file:$WORK/lun3.img" --queues 2 $([ "$PACKED" = 0 ] || echo --verbose) \
        >"$WORK/target.log" 2>&1 &
    TARGET_PID=$!
    DEV_ARGS=(--vhost-user-scsi "$WORK/vhost-scsi.sock" --num-queues 2) QEMU_ARGS=()
    if [ "$HEAVY" = 1 ] && ! bash "$HERE/../../scripts/test-hooks.sh" "$BUILD_DIR"; then
        skip "migration-heavy-read-unlogged" "needs the test hooks: a build with -Dtest_hooks=true (scripts/build.sh)"
    elif [ "$HEAVY" = 1 ]; then
        # The broken daemon: a second device, its own socket and LUN 5.
        VHOST_SCSI_TEST_FAULT=log-skip-data-in "$TARGET" --socket-path "$WORK/hooked.sock" \
            --lun "5=file:$WORK/lun5.img" --queues 2 >"$WORK/hooked.log" 2>&1 &
        HOOKED_PID=$!
        DEV_ARGS+=(--vhost-user-scsi "$WORK/hooked.sock")
        UNLOGGED=1
    fi
    [ "$PACKED" = 0 ] || DEV_ARGS+=(--device-opts packed=on)
    if wait_for_socket "$WORK/vhost-scsi.sock" "$TARGET_PID" &&
       { [ "$UNLOGGED" = 0 ] || wait_for_socket "$WORK/hooked.sock" "$HOOKED_PID"; }; then
        pass "migration: target listening (luns 0-3)${HOOKED_PID:+, and a second one with the test hook log-skip-data-in (lun 5)}"
    else
        fail "migration: targets listening"; sed 's/^/# target: /' "$WORK"/*.log; finish
    fi
else
    # The same files through QEMU's block layer: `direct` is cache.direct.
    DEV_ARGS=() QEMU_ARGS=(-object iothread,id=io0
        -device virtio-scsi-pci,id=vs0,num_queues=2,iothread=io0)
    for l in 0 1 2 3; do
        f=$WORK/lun$l.img
        [ $l = 1 ] && f=$WORK/mbox.img
        QEMU_ARGS+=(-blockdev "driver=file,filename=$f,node-name=d$l,aio=io_uring$([ $l = 2 ] && echo ,cache.direct=on)"
                    -device "scsi-hd,bus=vs0.0,scsi-id=0,lun=$l,drive=d$l")
    done
    note "peer: QEMU's own virtio-scsi-pci + scsi-hd"
    [ "$HEAVY" = 0 ] ||
        skip "migration-heavy-read-unlogged" "the test hook is the target's; no target with --peer qemu"
fi

# init_on_free: the guest zeroes what it frees (the initramfs archive once
# unpacked), which QEMU then migrates as zero pages.
APPEND="init_on_free=1 guest.fio_size=$FIO_SIZE guest.heavy_size=$HEAVY_SIZE"
APPEND+=" guest.migrations=$MIGRATIONS guest.load=$LOAD guest.unlogged=$UNLOGGED"
APPEND+=" guest.wait=$WANT_TIMEOUT${EXTRA_APPEND:+ $EXTRA_APPEND}"

# start_qemu I [URI]: QEMU process I, the same guest each time; with URI a
# destination, waiting for the migration there and paused after it (-S).
# A second monitor, events$I.sock, records why the process shut down.
start_qemu() {
    local i=$1 in=()
    [ -z "${2:-}" ] || in=(--incoming "$2")
    : >"$WORK/guest$i.log"
    "$HERE/run-qemu.sh" --initrd "$INITRD" --log "$WORK/guest$i.log" --timeout "$QEMU_TIMEOUT" \
        --qmp "$WORK/qmp$i.sock" --mem "$MEM" --smp "$SMP" --append "$APPEND" \
        ${CONSOLE[@]+"${CONSOLE[@]}"} ${DEV_ARGS[@]+"${DEV_ARGS[@]}"} "${in[@]}" \
        -- ${QEMU_ARGS[@]+"${QEMU_ARGS[@]}"} -qmp "unix:$WORK/events$i.sock,server=on,wait=off" \
        ${2:+-S} 2>>"$WORK/run-qemu.err" &
    QPIDS[$i]=$!
    "$QMP" "$WORK/events$i.sock" --timeout "$QEMU_TIMEOUT" wait-event SHUTDOWN \
        >"$WORK/shutdown$i.json" 2>&1 &
}

# wait_want I WHAT: the guest, running in QEMU process I, asked for WHAT.
wait_want() {
    timeout "$WANT_TIMEOUT" grep -q -m1 "GUEST-WANT: $2" \
        <(tail -n +1 -f --pid="${QPIDS[$1]}" "$WORK/guest$1.log" 2>/dev/null)
}

# Migration 2 is held for the heavy read, which must fill pages QEMU has
# already sent, so that only the dirty log can make it send them again.
# hold_set I, before `migrate`, makes QEMU process I switch over only when
# a dirty-bitmap sync finds no dirty page at all (a 1 ms downtime at 1000
# B/s; QEMU before 8.2 has no avail-switchover-bandwidth: 1 ms at the
# measured rate), and caps the bandwidth at 16 MiB/s: the first pass over
# RAM takes seconds, during which the guest's load dirties pages, so the
# pass after it takes long enough for hold_reads to act.  hold_reads I
# waits for the end of QEMU's first complete pass (dirty sync 2) and, in
# the same QMP connection, caps the bandwidth at 64 KiB/s: the pages
# dirtied meanwhile take minutes to send, so no further sync comes; only
# then does it tell the guest "2 active".  The guest reads all of
# HEAVY_SIZE and says so ("GUEST-WANT: migrate 2 read"); then the host
# restores the parameters hold_set saved and the migration converges.
hold_set() {
    local p=$WORK/qmp$1.sock
    "$QMP" "$p" execute query-migrate-parameters >"$WORK/params$1.json" 2>"$WORK/qmp.err" &&
    { "$QMP" "$p" execute migrate-set-parameters '{"max-bandwidth": 16777216,
          "downtime-limit": 1, "avail-switchover-bandwidth": 1000}' >/dev/null 2>&1 ||
      "$QMP" "$p" execute migrate-set-parameters '{"max-bandwidth": 16777216,
          "downtime-limit": 1}' >/dev/null 2>>"$WORK/qmp.err"; } ||
    { fail "migration-heavy-read: held migration 2 (downtime-limit 1 ms)"; sed 's/^/# /' "$WORK/qmp.err"; return 1; }
}
hold_reads() {
    local p=$WORK/qmp$1.sock saved
    if ! "$QMP" "$p" --timeout "$MIGRATE_TIMEOUT" wait-sync 2 migrate-set-parameters \
            '{"max-bandwidth": 65536}' >"$WORK/hold.json" 2>"$WORK/qmp.err"; then
        fail "migration-heavy-read: migration 2 held after QEMU's first RAM pass"
        sed 's/^/# /' "$WORK/qmp.err"; return 1
    fi
    note "migration 2 held after QEMU's first RAM pass: $(python3 -c 'import json, sys
r = json.load(sys.stdin)["ram"]
print("dirty sync %d, %d MiB sent, %d MiB dirty" % (r["dirty-sync-count"],
      r["transferred"] >> 20, r["remaining"] >> 20))' <"$WORK/hold.json")"
    mbox 2 active
    wait_want "$1" "migrate 2 read" ||
        fail "migration-heavy-read: the guest read lun3${HOOKED_PID:+ and lun5} while migration 2 was held"
    saved=$(python3 -c 'import json, sys
r = json.load(sys.stdin)
print(json.dumps({k: r[k] for k in ("downtime-limit", "max-bandwidth",
                                    "avail-switchover-bandwidth") if k in r}))' <"$WORK/params$1.json")
    "$QMP" "$p" execute migrate-set-parameters "$saved" >/dev/null 2>"$WORK/qmp.err" ||
    { fail "migration-heavy-read: released migration 2 ($saved)"; sed 's/^/# /' "$WORK/qmp.err"; return 1; }
}

# migrate K: from QEMU process K-1 to process K (started by start_qemu K
# URI, the destination on URI, before the guest asked); one TAP line, with
# QMP's total-time and downtime ("migration K ... total-time T ms,
# downtime D ms", which scripts/bench-migration.sh reads).
migrate() {
    local k=$1 src=$(($1 - 1)) port=${PORTS[$1]} out
    if ! "$QMP" "$WORK/qmp$k.sock" --timeout 60 wait-status inmigrate >"$WORK/qmp.err" 2>&1; then
        fail "migration-pingpong: destination $k waiting on 127.0.0.1:$port"; sed 's/^/# /' "$WORK/qmp.err"
        return 1
    fi
    [ "$k:$HEAVY" != 2:1 ] || hold_set "$src" || return 1
    if ! "$QMP" "$WORK/qmp$src.sock" execute migrate "{\"uri\": \"tcp:127.0.0.1:$port\"}" \
            >"$WORK/qmp.err" 2>&1; then
        fail "migration-pingpong: migrate command $k"; sed 's/^/# /' "$WORK/qmp.err"
        return 1
    fi
    if [ "$k:$HEAVY" = 2:1 ]; then
        hold_reads "$src" || return 1
    else
        mbox "$k" active
    fi
    if ! "$QMP" "$WORK/qmp$src.sock" --timeout "$MIGRATE_TIMEOUT" wait-migration \
            >"$WORK/migrate$k.json" 2>"$WORK/qmp.err"; then
        fail "migration-pingpong: migration $k completed: $(cat "$WORK/migrate$k.json" "$WORK/qmp.err")"
        return 1
    fi
    out=$(python3 -c 'import json, sys; r = json.load(sys.stdin)
print("total-time %s ms, downtime %s ms, %s MiB transferred" % (r.get("total-time"),
      r.get("downtime"), r.get("ram", {}).get("transferred", 0) >> 20))' <"$WORK/migrate$k.json")
    if ! "$QMP" "$WORK/qmp$k.sock" --timeout 30 wait-status paused >"$WORK/qmp.err" 2>&1; then
        fail "migration-pingpong: destination $k received the guest"; sed 's/^/# /' "$WORK/qmp.err"
        return 1
    fi
    mbox "$k" done
    if "$QMP" "$WORK/qmp$k.sock" execute cont >"$WORK/qmp.err" 2>&1; then
        pass "migration-pingpong: migration $k (process $src -> $k, tcp:127.0.0.1:$port) completed: $out"
    else
        fail "migration-pingpong: cont on destination $k"; sed 's/^/# /' "$WORK/qmp.err"
        return 1
    fi
    "$QMP" "$WORK/qmp$src.sock" execute quit >/dev/null 2>&1
    wait "${QPIDS[$src]}" 2>/dev/null   # run-qemu's 125: QEMU ended without GUEST-EXIT
    return 0
}

# prepare K: starts destination K (QEMU takes seconds to start under load:
# done while the guest runs, not while it waits).
declare -a PORTS=()
prepare() {
    PORTS[$1]=$("$QMP" - free-port)
    start_qemu "$1" "tcp:127.0.0.1:${PORTS[$1]}"
}

start_qemu 0
last=0
for k in $(seq 1 "$MIGRATIONS"); do
    prepare "$k"
    if ! wait_want "$last" "migrate $k"; then
        fail "migration-pingpong: the guest asked for migration $k"
        break
    fi
    migrate "$k" || break
    last=$k
done

wait "${QPIDS[$last]}"; rc=$?
# The console moved with the guest: one log after the other is its output.
for i in $(seq 0 "$last"); do tail -n +2 "$WORK/guest$i.log"; done >"$WORK/console.log"
relay_guest_tap "$WORK/console.log" "guest" " * - "
case "$rc" in
0) pass "migration: guest finished on QEMU process $last, all its checks passed" ;;
124|125) fail "migration: guest did not finish (run-qemu status $rc; QEMU's SHUTDOWN event: $(cat "$WORK/shutdown$last.json"))"
         tr -d '\r' <"$WORK/console.log" | tail -n 30 | sed 's/^/# console: /' ;;
*) fail "migration: guest reported failures (GUEST-EXIT: $rc)" ;;
esac

# What the guest's fio wrote, read back by the host from the LUNs' files.
if [ "$LOAD" = write ]; then
    for t in lun0:migration-basic lun2:migration-direct; do
        regions=$(tr -d '\r' <"$WORK/console.log" | sed -n "s/^GUEST-REGIONS: ${t%%:*} \([0-9]*\)$/\1/p")
        [ -n "$regions" ] || { fail "${t#*:}: the guest reported the regions its fio wrote"; continue; }
        for r in $(seq 0 $((regions - 1))); do
            host_fio "${t#*:}: host verify of ${t%%:*}'s region $r: it holds what the guest's fio wrote" \
                "$WORK/${t%%:*}.img" --name="r$r" --rw=randwrite --bs=4k --offset=$((r * 8))M \
                --size=8M --verify_only
        done
    done
fi

# Every QEMU process's queues (the destinations' too) ran packed.
if [ "$PEER" = target ] && [ "$PACKED" = 1 ]; then
    guest_check_packed_starts "$WORK/target.log" $((4 * (MIGRATIONS + 1)))
fi
if [ "$PEER" = target ]; then
    target_stop_checked "$TARGET_PID" "$WORK/target.log"
    [ -z "$HOOKED_PID" ] || target_stop_checked "$HOOKED_PID" "$WORK/hooked.log"
    TARGET_PID="" HOOKED_PID=""
fi
[ "$FAILED" = 0 ] || KEEP=1
finish

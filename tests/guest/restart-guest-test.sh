#!/bin/bash
# The daemon restarted under a running Linux guest, as an upgrade does it:
# starts vhost-scsi-target with two file LUNs and LUN 2 a `hold:` LUN (the
# test backend, tests only: every request waits while a file exists),
# boots a guest on `-device vhost-user-scsi-pci` whose socket chardev
# reconnects (reconnect-ms, QEMU 9.2 and later), and when the guest
# (tests/guest/guest-scsi-checks.sh, phase restart) asks on its console
# while fio writes and verifies LUN 0, creates the hold file, tells the
# guest so through a token in LUN 1's file, and waits until the target's
# `stats` show the write the guest then sends to LUN 2 in flight.  Only
# then does it kill the target with SIGKILL (what it had taken off the
# rings is lost with it): the request in flight there is held, never a
# matter of rate or of the machine's speed.  It writes a token into LUN
# 1's file and starts a new target on the same socket, LUN 2 plain RAM.
# QEMU reconnects and hands the new daemon the inflight area, from which
# it must resubmit what the old one held: the guest's held write completes
# and reads back from the new target's empty RAM, which only the
# resubmission can have filled; the guest sees the token on LUN 1, and fio
# must finish with zero verify errors and the kernel log without an I/O
# error or command timeout.  With --packed the rings are packed
# (packed=on), whose position only the inflight area knows: the new
# daemon's log must say it resumed them from there.  Needs the test hooks
# (a build with -Dtest_hooks=true, as scripts/build.sh makes); skipped,
# by name, without them.  Prints TAP; exits non-zero on failure.
#
# Usage: tests/guest/restart-guest-test.sh [options]
#   --build-dir DIR     meson build dir (default $BUILD_DIR or build)
#   --packed            the device with packed=on
#   --keep              keep the work directory (logs, images)
#   --console           show the guest console while it runs
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
PACKED=0
guest_extra_option() {
    case "$1" in
    --packed) PACKED=1; SHIFTED=1 ;;
    esac
}
guest_parse_args "$@"
LUN0_BYTES=$((256 << 20)) LUN1_BYTES=$((16 << 20)) LUN2_BYTES=$((16 << 20))
# The guest asks within this long of booting.
WANT_TIMEOUT=150
# Bound on the guest's write reaching the hold (an event that must happen).
HELD_TIMEOUT=120

if ! bash "$HERE/../../scripts/test-hooks.sh" "$BUILD_DIR"; then
    echo "1..0 # SKIP needs the test hooks: a build with -Dtest_hooks=true (scripts/build.sh)"
    exit 0
fi

TARGET_PID="" QEMU_PID=""
guest_cleanup_extra() { guest_kill_all "$QEMU_PID" "$TARGET_PID"; }
guest_work_dir restart-guest

IMG_DIR=${GUEST_IMAGE_DIR:-$BUILD_DIR/guest-images}
INITRD=$IMG_DIR/scsi-checks.cpio
guest_initramfs "$INITRD" --init-script "$HERE/guest-scsi-checks.sh" --bin sg_xcopy \
    --bin sg_sanitize

TARGET=$BUILD_DIR/tools/vhost-scsi-target
SOCK=$WORK/vhost-scsi.sock CTL=$WORK/control.sock
truncate -s "$LUN0_BYTES" "$WORK/lun0.img"
truncate -s "$LUN1_BYTES" "$WORK/lun1.img"

HOLD=$WORK/hold/lun2
mkdir "$WORK/hold"

# start_target N LUN2-SPEC: target number N on the socket, its log target-N.log.
start_target() {
    rm -f "$SOCK" "$CTL"
    VHOST_SCSI_TEST_BACKENDS=1 "$TARGET" --socket-path "$SOCK" --control "$CTL" \
        --lun "0=file:$WORK/lun0.img" --lun "1=file:$WORK/lun1.img" --lun "2=$2" \
        --queues 2 --verbose >"$WORK/target-$1.log" 2>&1 &
    TARGET_PID=$!
    if wait_for_socket "$SOCK" "$TARGET_PID"; then
        pass "target $1 listening on $SOCK (pid $TARGET_PID)"
    else
        fail "target $1 listening on $SOCK"
        sed 's/^/# target: /' "$WORK/target-$1.log"; finish
    fi
}

# wait_want WHAT: the guest asked for WHAT (within WANT_TIMEOUT).
wait_want() { guest_wait_want "$1" "$WORK/guest.log" "$QEMU_PID" "$WANT_TIMEOUT"; }

# lun1_token TEXT: 16 bytes at the start of LUN 1's file, which the guest polls.
lun1_token() { printf '%s' "$1" | dd of="$WORK/lun1.img" conv=notrunc status=none; }

# lun2_in_flight: the requests target 1 has on LUN 2 and has not completed
# (its `stats`), or nothing when the control socket does not answer.
lun2_in_flight() {
    "$BUILD_DIR/tools/vhost-scsi-ctl" target --control "$CTL" --json stats 2>/dev/null |
        python3 -c 'import json, sys
print(next(b["in_flight"] for b in json.load(sys.stdin)["backends"] if b["name"].endswith(":2")))' \
        2>/dev/null
}

# wait_held: up to HELD_TIMEOUT for target 1 to hold a request on LUN 2.
wait_held() {
    local n
    for _ in $(seq $((HELD_TIMEOUT * 10))); do
        n=$(lun2_in_flight)
        [ "${n:-0}" -gt 0 ] && { HELD=$n; return 0; }
        kill -0 "$TARGET_PID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# Target 1 holds LUN 2's requests once the file $HOLD exists; the guest
# boots (and reads LUN 2's partition table) before it does.
start_target 1 "hold:$LUN2_BYTES,while=$HOLD"
RUN_ARGS=(--vhost-user-scsi "$SOCK" --num-queues 2 --chardev-opts reconnect-ms=200)
[ "$PACKED" = 0 ] || RUN_ARGS+=(--device-opts packed=on)
APPEND="guest.lun0_bytes=$LUN0_BYTES guest.lun0_bs=512 guest.lun1_bytes=$LUN1_BYTES"
APPEND+=" guest.lun1_bs=512 guest.lun2_bytes=$LUN2_BYTES"
: >"$WORK/guest.log"
"$HERE/run-qemu.sh" --initrd "$INITRD" --log "$WORK/guest.log" --timeout 420 \
    --append "$APPEND guest.phase=restart" ${CONSOLE[@]+"${CONSOLE[@]}"} "${RUN_ARGS[@]}" &
QEMU_PID=$!

HELD=0
if wait_want restart; then
    : >"$HOLD"
    lun1_token 'LUN-2-IS-HELD!!!'
    if wait_held; then
        pass "target 1 holds the guest's write to LUN 2 ($HELD request(s) in flight)"
    else
        fail "target 1 holds the guest's write to LUN 2 (none in flight within $HELD_TIMEOUT s)"
        tail -n 20 "$WORK/target-1.log" | sed 's/^/# target 1: /'
    fi
    kill -KILL "$TARGET_PID"
    wait "$TARGET_PID" 2>/dev/null
    pass "target 1 killed (SIGKILL) with the guest's write to LUN 2 in flight"
    rm -f "$HOLD"
    # Written while no back-end runs: only the new one can serve it.
    lun1_token 'RESTARTED-TOKEN!'
    # LUN 2 plain RAM, empty: the held write can reach it only by resubmission.
    start_target 2 "ram:$LUN2_BYTES"
else
    fail "the guest asked for the restart"
fi

wait "$QEMU_PID"; rc=$?
QEMU_PID=""
relay_guest_tap "$WORK/guest.log" "guest" " * - "
guest_run_status guest "$rc" "$WORK/guest.log"
if grep -q "GET_INFLIGHT_FD\|SET_INFLIGHT_FD" "$WORK/target-2.log"; then
    pass "QEMU handed the new target the inflight area (SET_INFLIGHT_FD)"
else
    fail "QEMU handed the new target the inflight area"
    tail -n 20 "$WORK/target-2.log" | sed 's/^/# target 2: /'
fi
if grep -q "resubmitting [0-9]* in-flight requests" "$WORK/target-2.log"; then
    pass "target 2 resubmitted what target 1 had taken and not completed ($(grep -o \
        "resubmitting [0-9]* in-flight" "$WORK/target-2.log" | awk '{n += $2} END {print n}') requests, $HELD held on LUN 2)"
else
    fail "target 2 resubmitted what target 1 had taken and not completed"
    grep -i "inflight\|resubmit" "$WORK/target-2.log" | tail -n 10 | sed 's/^/# target 2: /'
fi
if [ "$PACKED" = 1 ]; then
    guest_check_packed_starts "$WORK/target-2.log" 1
    if grep -q "resuming the packed ring at base" "$WORK/target-2.log"; then
        pass "target 2 resumed a packed ring from the inflight area, not QEMU's stale base"
    else
        fail "target 2 resumed a packed ring from the inflight area"
        grep -i "inflight\|packed" "$WORK/target-2.log" | tail -n 10 | sed 's/^/# target 2: /'
    fi
fi
target_stop_checked "$TARGET_PID" "$WORK/target-2.log"
TARGET_PID=""
[ "$FAILED" = 0 ] || KEEP=1
finish

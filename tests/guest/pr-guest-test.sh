#!/bin/bash
# Persistent reservations between two Linux guests: starts vhost-scsi-target
# with one file LUN, maps it in a second controller (vm2) with an initiator
# name of its own, and boots two TCG guests at once, node A on the default
# controller and node B on vm2, each running tests/guest/guest-pr.sh: A
# registers and reserves Write Exclusive - Registrants Only; B, unregistered,
# gets RESERVATION CONFLICT, registers, writes, and fences A with PREEMPT AND
# ABORT while fio with verification runs on B; A's writes then conflict.  The
# guests wait for each other through the reservation state itself.  Their
# registrations set APTPL: the daemon is restarted and node A booted again,
# and B's reservation is still there.  Prints TAP; exits non-zero on failure.
#
# Usage: tests/guest/pr-guest-test.sh [options]
#   --build-dir DIR     meson build dir (default $BUILD_DIR or build)
#   --keep              keep the work directory (logs, images)
#   --console           show node A's console while it runs
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
guest_parse_args "$@"
LUN_BYTES=$((64 << 20))

TARGET_PID="" QEMU_A="" QEMU_B=""
guest_cleanup_extra() {
    for p in $QEMU_A $QEMU_B $TARGET_PID; do
        if kill -0 "$p" 2>/dev/null; then kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; fi
    done
}
guest_work_dir pr-guest

if ! command -v sg_persist >/dev/null; then
    skip "two guests fence each other" "sg_persist not installed (sg3-utils)"
    finish
fi
IMG_DIR=${GUEST_IMAGE_DIR:-$BUILD_DIR/guest-images}
INITRD=$IMG_DIR/pr.cpio
guest_initramfs "$INITRD" --init-script "$HERE/guest-pr.sh" --bin sg_persist

TARGET=$BUILD_DIR/tools/vhost-scsi-target
CTL_TOOL=$BUILD_DIR/tools/vhost-scsi-ctl
SOCK=$WORK/vhost-scsi.sock SOCK2=$WORK/vm2.sock CTL=$WORK/control.sock
truncate -s "$LUN_BYTES" "$WORK/shared.img"
start_target() {  # start_target LOG
    "$TARGET" --socket-path "$SOCK" --control "$CTL" --lun "0=file:$WORK/shared.img" \
        --queues 2 >"$1" 2>&1 &
    TARGET_PID=$!
    if wait_for_socket "$SOCK" "$TARGET_PID"; then
        pass "target listening on $SOCK"
    else
        fail "target listening"; sed 's/^/# target: /' "$1"; finish
    fi
}
start_target "$WORK/target.log"
ctl() {  # ctl DESC ARGS...
    desc=$1; shift
    if "$CTL_TOOL" target --control "$CTL" "$@" >"$WORK/ctl.out" 2>&1; then
        pass "$desc"
    else
        fail "$desc"; sed 's/^/# ctl: /' "$WORK/ctl.out"; finish
    fi
}
ctl "controller vm2 with initiator iqn.2026-12.test:node-b" controller add vm2 "$SOCK2" \
    --queues 2 --initiator iqn.2026-12.test:node-b
ctl "the LUN mapped in vm2 too" --controller vm2 lun map 0 lun0:0

"$HERE/run-qemu.sh" --initrd "$INITRD" --log "$WORK/guest-a.log" --timeout 540 \
    --append "guest.role=a" ${CONSOLE[@]+"${CONSOLE[@]}"} --vhost-user-scsi "$SOCK" &
QEMU_A=$!
"$HERE/run-qemu.sh" --initrd "$INITRD" --log "$WORK/guest-b.log" --timeout 540 \
    --append "guest.role=b" --vhost-user-scsi "$SOCK2" &
QEMU_B=$!
wait "$QEMU_A"; rc_a=$?
QEMU_A=""
wait "$QEMU_B"; rc_b=$?
QEMU_B=""
relay() {  # relay LOG LABEL RC
    relay_guest_tap "$1" "$2" " * - "
    guest_run_status "$2" "$3" "$1"
}
relay "$WORK/guest-a.log" "node a" "$rc_a"
relay "$WORK/guest-b.log" "node b" "$rc_b"
if grep -q "PREEMPT AND ABORT by iqn.2026-12.test:node-b" "$WORK/target.log"; then
    pass "the target held the fence until the LUN's commands in flight completed (its log)"
else
    fail "the target logged the PREEMPT AND ABORT"
fi

if [ -f "$WORK/shared.img.pr" ]; then
    pass "the LUN's state file is beside its file (APTPL)"
else
    fail "the LUN's state file $WORK/shared.img.pr exists"
fi
target_stop_checked "$TARGET_PID" "$WORK/target.log"

start_target "$WORK/target2.log"
if grep -q "restored from $WORK/shared.img.pr" "$WORK/target2.log"; then
    pass "the restarted target restored the reservations"
else
    fail "the restarted target restored the reservations"; sed 's/^/# target: /' "$WORK/target2.log"
fi
"$HERE/run-qemu.sh" --initrd "$INITRD" --log "$WORK/guest-a2.log" --timeout 300 \
    --append "guest.role=restarted" ${CONSOLE[@]+"${CONSOLE[@]}"} --vhost-user-scsi "$SOCK" &
QEMU_A=$!
wait "$QEMU_A"; rc=$?
QEMU_A=""
relay "$WORK/guest-a2.log" "node a after the restart" "$rc"
target_stop_checked "$TARGET_PID" "$WORK/target2.log"
TARGET_PID=""
[ "$FAILED" = 0 ] || KEEP=1
finish

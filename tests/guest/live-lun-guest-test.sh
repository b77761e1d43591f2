#!/bin/bash
# Live LUN changes as a Linux guest sees them: starts vhost-scsi-target with
# a control socket, boots a guest on `-device vhost-user-scsi-pci` under TCG,
# and, each time the guest (tests/guest/guest-scsi-checks.sh, phase live)
# asks on its console, adds LUN 2 (a file), grows it, and removes it through
# `vhost-scsi-ctl target`.  The guest checks that the new disk appears as
# /dev/sdX, shows its new size and disappears, with no manual rescan, while
# fio writes and verifies LUN 0.  Prints TAP; exits non-zero on failure.
#
# Usage: tests/guest/live-lun-guest-test.sh [options]
#   --build-dir DIR     meson build dir (default $BUILD_DIR or build)
#   --keep              keep the work directory (logs, images)
#   --console           show the guest console while it runs
#   --lun2-spec SPEC    LUN 2 is SPEC (its device must be 64 MiB) instead of a file
#   --lun2-grow CMD     grow it to 96 MiB with CMD, from outside, instead of
#                       `lun resize` (the target must notice by itself: rbd:)
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
LUN2_SPEC="" LUN2_GROW=""
guest_extra_option() {
    case "$1" in
    --lun2-spec) LUN2_SPEC=$2; SHIFTED=2 ;;
    --lun2-grow) LUN2_GROW=$2; SHIFTED=2 ;;
    esac
}
guest_parse_args "$@"
LUN0_BYTES=$((256 << 20)) LUN1_BYTES=$((64 << 20))
LUN2_BYTES=$((64 << 20)) LUN2_GROWN=$((96 << 20))
# Each change is asked for within this long of the previous one.
WANT_TIMEOUT=150

TARGET_PID="" QEMU_PID=""
guest_cleanup_extra() { guest_kill_all "$QEMU_PID" "$TARGET_PID"; }
guest_work_dir live-lun-guest

IMG_DIR=${GUEST_IMAGE_DIR:-$BUILD_DIR/guest-images}
INITRD=$IMG_DIR/scsi-checks.cpio
guest_initramfs "$INITRD" --init-script "$HERE/guest-scsi-checks.sh"

TARGET=$BUILD_DIR/tools/vhost-scsi-target
CTL_TOOL=$BUILD_DIR/tools/vhost-scsi-ctl
SOCK=$WORK/vhost-scsi.sock CTL=$WORK/control.sock
truncate -s "$LUN0_BYTES" "$WORK/lun0.img"
truncate -s "$LUN2_BYTES" "$WORK/lun2.img"
"$TARGET" --socket-path "$SOCK" --control "$CTL" --lun "0=file:$WORK/lun0.img" \
    --lun "1=ram:$LUN1_BYTES" --queues 2 >"$WORK/target.log" 2>&1 &
TARGET_PID=$!
if wait_for_socket "$SOCK" "$TARGET_PID"; then
    pass "target listening on $SOCK with control socket $CTL"
else
    fail "target listening"; sed 's/^/# target: /' "$WORK/target.log"; finish
fi

ctl() {  # ctl DESC ARGS...: one control call, its output as a note on failure
    desc=$1; shift
    if "$CTL_TOOL" target --control "$CTL" "$@" >"$WORK/ctl.out" 2>&1; then
        pass "$desc: $(head -n 1 "$WORK/ctl.out")"
    else
        fail "$desc"; sed 's/^/# ctl: /' "$WORK/ctl.out"
    fi
}

# wait_want WHAT: the guest asked for WHAT (within WANT_TIMEOUT).
wait_want() { guest_wait_want "$1" "$WORK/guest.log" "$QEMU_PID" "$WANT_TIMEOUT"; }

APPEND="guest.lun0_bytes=$LUN0_BYTES guest.lun0_bs=512 guest.lun1_bytes=$LUN1_BYTES"
APPEND+=" guest.lun1_bs=512 guest.lun2_bytes=$LUN2_BYTES guest.lun2_grown=$LUN2_GROWN"
: >"$WORK/guest.log"
"$HERE/run-qemu.sh" --initrd "$INITRD" --log "$WORK/guest.log" --timeout 420 \
    --append "$APPEND guest.phase=live" ${CONSOLE[@]+"${CONSOLE[@]}"} \
    --vhost-user-scsi "$SOCK" --num-queues 2 &
QEMU_PID=$!

if wait_want add; then
    ctl "lun add 2 while the guest runs" lun add "2=${LUN2_SPEC:-file:$WORK/lun2.img}"
    if wait_want resize; then
        if [ -n "$LUN2_GROW" ]; then
            if $LUN2_GROW >"$WORK/grow.out" 2>&1; then
                pass "lun 2 grown to $LUN2_GROWN bytes from outside ($LUN2_GROW)"
            else
                fail "$LUN2_GROW"; sed 's/^/# grow: /' "$WORK/grow.out"
            fi
        else
            ctl "lun resize 2 to $LUN2_GROWN bytes" lun resize 2 "$LUN2_GROWN"
        fi
        if wait_want remove; then
            ctl "lun remove 2" lun remove 2
        else
            fail "the guest asked for the removal"
        fi
    else
        fail "the guest asked for the resize"
    fi
else
    fail "the guest asked for a LUN"
fi

wait "$QEMU_PID"; rc=$?
QEMU_PID=""
relay_guest_tap "$WORK/guest.log" "guest" " * - "
case "$rc" in
0) pass "guest finished, all its checks passed" ;;
124|125) fail "guest did not finish (run-qemu status $rc)"
         tr -d '\r' <"$WORK/guest.log" | tail -n 30 | sed 's/^/# console: /' ;;
*) fail "guest reported failures (GUEST-EXIT: $rc)" ;;
esac
if [ -n "$LUN2_SPEC" ]; then
    :   # not a file of ours
elif [ "$(stat -c %s "$WORK/lun2.img")" = "$LUN2_GROWN" ]; then
    pass "lun2's file was grown to $LUN2_GROWN bytes"
else
    fail "lun2's file was grown: $(stat -c %s "$WORK/lun2.img") bytes"
fi

target_stop_checked "$TARGET_PID" "$WORK/target.log"
TARGET_PID=""
[ "$FAILED" = 0 ] || KEEP=1
finish

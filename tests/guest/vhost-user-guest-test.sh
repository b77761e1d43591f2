#!/bin/bash
# End-to-end guest test of vhost-scsi-target: starts the target with a file
# LUN and a ram LUN, boots a Linux guest on `-device vhost-user-scsi-pci`
# under TCG, and has the guest (tests/guest/guest-scsi-checks.sh) check
# geometry, INQUIRY/VPD 0x83/READ CAPACITY, fio write+verify, UNMAP and a
# device reset with I/O in flight.  Then it checks the target survived QEMU
# going away and serves a second guest that finds phase-1 data intact.
# Prints TAP (one line per check, plan at the end); exits non-zero on failure.
#
# Usage: tests/guest/vhost-user-guest-test.sh [options]
#   --peer target|qemu  back-end under test (default $GUEST_TEST_PEER or
#                       target); `qemu` uses QEMU's own virtio-scsi-pci +
#                       scsi-hd instead, to check the test itself
#   --build-dir DIR     meson build dir (default $BUILD_DIR or build)
#   --lun0-bytes N      size of the file LUN (default 512M; >= 160M)
#   --lun1-bytes N      size of the ram LUN (default 256M)
#   --lun0-bs N / --lun1-bs N   expected logical block size (default 512)
#   --lun0-spec S / --lun1-spec S  override the target's --lun specs
#   --lun0-opts O / --lun1-opts O  append to the default specs (",block-size=4096")
#   --fio-size S        size of the phase-1 verify jobs (default 64M)
#   --resets N          device reset cycles in phase 1 (default 1)
#   --target-arg ARG    extra target argument (repeatable, e.g. --verbose)
#   --packed            the device with packed=on: the guest drives packed
#                       virtqueues (VIRTIO_F_RING_PACKED); checks the target
#                       ran every queue packed
#   --no-reconnect      skip the second boot
#   --keep              keep the work directory (logs, images)
#   --console           show the guest console while it runs
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
PEER=${GUEST_TEST_PEER:-target}
LUN0_BYTES=512M LUN1_BYTES=256M LUN0_BS=512 LUN1_BS=512
LUN0_SPEC="" LUN1_SPEC="" FIO_SIZE=64M RECONNECT=1 TARGET_ARGS=() RESETS=1 LUN0_OPTS="" LUN1_OPTS=""
PACKED=0

guest_extra_option() {
    case "$1" in
    --peer) PEER=$2; SHIFTED=2 ;;
    --lun0-bytes) LUN0_BYTES=$2; SHIFTED=2 ;;
    --lun1-bytes) LUN1_BYTES=$2; SHIFTED=2 ;;
    --lun0-bs) LUN0_BS=$2; SHIFTED=2 ;;
    --lun1-bs) LUN1_BS=$2; SHIFTED=2 ;;
    --lun0-spec) LUN0_SPEC=$2; SHIFTED=2 ;;
    --lun1-spec) LUN1_SPEC=$2; SHIFTED=2 ;;
    --lun0-opts) LUN0_OPTS=$2; SHIFTED=2 ;;
    --lun1-opts) LUN1_OPTS=$2; SHIFTED=2 ;;
    --fio-size) FIO_SIZE=$2; SHIFTED=2 ;;
    --resets) RESETS=$2; SHIFTED=2 ;;
    --target-arg) TARGET_ARGS+=("$2"); SHIFTED=2 ;;
    --no-reconnect) RECONNECT=0; SHIFTED=1 ;;
    --packed) PACKED=1; SHIFTED=1 ;;
    esac
}
guest_parse_args "$@"
case "$PEER" in target|qemu) ;; *) echo "--peer must be target or qemu" >&2; exit 2 ;; esac
# The queue-start lines that name the ring layout are debug lines.
[ "$PACKED" = 0 ] || TARGET_ARGS+=(--verbose)
bytes() { numfmt --from=iec "$1"; }
LUN0_BYTES=$(bytes "$LUN0_BYTES") LUN1_BYTES=$(bytes "$LUN1_BYTES")

TARGET_PID=""
guest_cleanup_extra() {
    if [ -n "$TARGET_PID" ] && kill -0 "$TARGET_PID" 2>/dev/null; then
        kill "$TARGET_PID" 2>/dev/null; wait "$TARGET_PID" 2>/dev/null
    fi
}
guest_work_dir vhost-user-guest

# Re-emits the guest's TAP lines from a console log under our numbering and
# shows the log tail when the guest did not finish.
relay_guest() {  # relay_guest LOG PHASE RC
    relay_guest_tap "$1" "guest$2" " * - "
    guest_run_status "guest phase $2" "$3" "$1"
}

# --- image --------------------------------------------------------------------
IMG_DIR=${GUEST_IMAGE_DIR:-$BUILD_DIR/guest-images}
INITRD=$IMG_DIR/scsi-checks.cpio
guest_initramfs "$INITRD" --init-script "$HERE/guest-scsi-checks.sh" --bin sg_xcopy \
    --bin sg_sanitize

# --- back-end -----------------------------------------------------------------
DISK0=$WORK/lun0.img
truncate -s "$LUN0_BYTES" "$DISK0"
QEMU_ARGS=() RUN_ARGS=()
if [ "$PEER" = target ]; then
    TARGET=$BUILD_DIR/tools/vhost-scsi-target
    SOCK=$WORK/vhost-scsi.sock
    [ -n "$LUN0_SPEC" ] || LUN0_SPEC="file:$DISK0$LUN0_OPTS"
    # LUN 1 takes SANITIZE (the guest erases it with sg_sanitize).
    [ -n "$LUN1_SPEC" ] || { LUN1_SPEC="ram:$LUN1_BYTES$LUN1_OPTS,sanitize=on"; SANITIZE_LUN=1; }
    "$TARGET" --socket-path "$SOCK" --lun "0=$LUN0_SPEC" --lun "1=$LUN1_SPEC" \
        --queues 2 ${TARGET_ARGS[@]+"${TARGET_ARGS[@]}"} >"$WORK/target.log" 2>&1 &
    TARGET_PID=$!
    if wait_for_socket "$SOCK" "$TARGET_PID"; then
        pass "target listening on $SOCK (pid $TARGET_PID)"
    else
        fail "target listening on $SOCK"
        sed 's/^/# target: /' "$WORK/target.log"; finish
    fi
    RUN_ARGS=(--vhost-user-scsi "$SOCK" --num-queues 2)
    [ "$PACKED" = 0 ] || RUN_ARGS+=(--device-opts packed=on)
else
    DISK1=$WORK/lun1.img
    truncate -s "$LUN1_BYTES" "$DISK1"
    QEMU_ARGS=(-object iothread,id=io0
        -device virtio-scsi-pci,id=vs0,num_queues=2,iothread=io0
        -blockdev "driver=file,filename=$DISK0,node-name=d0,aio=io_uring,cache.direct=on,discard=unmap"
        -device "scsi-hd,bus=vs0.0,scsi-id=0,lun=0,drive=d0,wwn=0x5000000000000a00,logical_block_size=$LUN0_BS,physical_block_size=$LUN0_BS"
        -blockdev "driver=file,filename=$DISK1,node-name=d1,aio=io_uring,cache.direct=on,discard=unmap"
        -device "scsi-hd,bus=vs0.0,scsi-id=0,lun=1,drive=d1,wwn=0x5000000000000a01,logical_block_size=$LUN1_BS,physical_block_size=$LUN1_BS")
    note "peer: QEMU's own virtio-scsi-pci + scsi-hd"
fi

target_alive() {  # target_alive WHEN
    if [ "$PEER" != target ]; then skip "target alive $1" "no target with --peer qemu"
    elif kill -0 "$TARGET_PID" 2>/dev/null; then pass "target alive $1"
    else fail "target alive $1"; sed 's/^/# target: /' "$WORK/target.log" | tail -n 30
    fi
}

APPEND="guest.lun0_bytes=$LUN0_BYTES guest.lun0_bs=$LUN0_BS"
APPEND+=" guest.lun1_bytes=$LUN1_BYTES guest.lun1_bs=$LUN1_BS"
APPEND+=" guest.discard_lun=1 guest.fio_size=$FIO_SIZE guest.resets=$RESETS"
[ -z "${SANITIZE_LUN:-}" ] || APPEND+=" guest.sanitize_lun=$SANITIZE_LUN"

# --- phase 1: everything, including a reset with I/O in flight ----------------
"$HERE/run-qemu.sh" --initrd "$INITRD" --log "$WORK/guest1.log" --timeout $((200 + 60 * RESETS)) \
    --append "$APPEND guest.phase=1" ${CONSOLE[@]+"${CONSOLE[@]}"} \
    ${RUN_ARGS[@]+"${RUN_ARGS[@]}"} -- ${QEMU_ARGS[@]+"${QEMU_ARGS[@]}"}
rc=$?
relay_guest "$WORK/guest1.log" 1 "$rc"
target_alive "after the first QEMU exited"
MARKER=$(tr -d '\r' <"$WORK/guest1.log" | sed -n 's/^GUEST-MARKER: \([0-9a-f]*\)$/\1/p')

# --- phase 2: a new QEMU connects to the same target --------------------------
if [ "$RECONNECT" = 1 ] && [ -n "$MARKER" ] &&
   { [ "$PEER" = qemu ] || kill -0 "$TARGET_PID" 2>/dev/null; }; then
    "$HERE/run-qemu.sh" --initrd "$INITRD" --log "$WORK/guest2.log" --timeout 120 \
        --append "$APPEND guest.phase=2 guest.marker_md5=$MARKER" \
        ${CONSOLE[@]+"${CONSOLE[@]}"} \
        ${RUN_ARGS[@]+"${RUN_ARGS[@]}"} -- ${QEMU_ARGS[@]+"${QEMU_ARGS[@]}"}
    rc=$?
    relay_guest "$WORK/guest2.log" 2 "$rc"
    target_alive "after the second QEMU exited"
elif [ "$RECONNECT" = 1 ]; then
    skip "second boot" "phase 1 wrote no marker or the target died"
fi

# --- packed rings: QEMU passed packed=on through and the queues ran packed ---
[ "$PACKED" = 0 ] || [ "$PEER" != target ] || guest_check_packed_starts "$WORK/target.log" 8

# --- shutdown -----------------------------------------------------------------
if [ "$PEER" = target ] && kill -0 "$TARGET_PID" 2>/dev/null; then
    target_stop_checked "$TARGET_PID" "$WORK/target.log"
    TARGET_PID=""
fi
[ "$FAILED" = 0 ] || KEEP=1
finish

#!/bin/bash
# The power-cut test: does a write acknowledged with FUA, or before a
# completed SYNCHRONIZE CACHE, survive a power cut?  The host kernel has no
# device-mapper, so one TCG guest (Debian's kernel, which has dm-log-writes)
# runs vhost-scsi-target and tests/guest/powercut-load (a front-end through
# the project's library) against LUNs on dm-log-writes devices, case after
# case (tests/guest/powercut-guest.sh): the log records every write that
# reached the device with its FLUSH/FUA flags, in the order a disk would
# have made it durable, and a mark after every acknowledgement.  The log,
# data and journal disks are files here; after the guest powered off,
# tests/guest/powercut-check.py replays each log and checks the contract at
# every cut point.  Cases (the default set runs in `make check`):
#   raw-direct, raw-buffered, raw-direct-wce-off, raw-buffered-wce-off: LUN
#       file:/dev/dm-N with and without `direct`, the write cache left on
#       or turned off by MODE SELECT;
#   ext4-direct, ext4-buffered, ext4-direct-wce-off, ext4-buffered-wce-off:
#       LUN file:lun.img on an ext4 made on the logged device;
#   fault-flush-dropped: raw, without `direct`, the dm device set to "write
#       through" so that Linux acknowledges flushes without sending them:
#       the checker must find violations (the test can fail);
#   ram: the ram backend's promise (no write cache, read back while the
#       daemon runs, zeros after a restart), checked in the guest;
# and, not by default, kernel-buffered, kernel-buffered-wce-off,
# kernel-direct, kernel-ext4-buffered (no daemon: powercut-load --device
# makes the same system calls on the device or file itself).  Cases
# without `direct` run the workload with --one-flush: dm-log-writes cannot
# order a write against two flushes in flight (docs/testing.md).
# The checker's own mutation (--mutate lose-cache: a disk that never writes
# its cache back) must find violations in each WCE-on log.  Prints TAP.
#
# Usage: tests/guest/powercut-test.sh [--build-dir DIR] [--writes N] [--blocks N]
#        [--cases LIST] [--keep] [--console]
#   --writes N    writes per case (default 600; more for a long run)
#   --blocks N    4 KiB blocks per LUN (default 1024)
#   --cases LIST  comma-separated subset of the cases above
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
WRITES=600 BLOCKS=1024
CASES=raw-direct,raw-buffered,raw-direct-wce-off,raw-buffered-wce-off,ext4-direct,ext4-buffered,ext4-direct-wce-off,ext4-buffered-wce-off,fault-flush-dropped,ram
guest_extra_option() {
    case "$1" in
    --writes) WRITES=$2; SHIFTED=2 ;;
    --blocks) BLOCKS=$2; SHIFTED=2 ;;
    --cases) CASES=$2; SHIFTED=2 ;;
    esac
}
guest_parse_args "$@"
case "$WRITES$BLOCKS" in *[!0-9]*) usage ;; esac
[ "$BLOCKS" -ge 16 ] && [ "$BLOCKS" -le 8192 ] || { echo "--blocks: 16..8192" >&2; usage; }
guest_work_dir powercut
START=$(date +%s)

TARGET=$BUILD_DIR/tools/vhost-scsi-target
LOAD=$BUILD_DIR/tests/guest/powercut-load
DMSETUP=$(command -v dmsetup || echo /usr/sbin/dmsetup)
for b in "$TARGET" "$LOAD" "$DMSETUP" /usr/sbin/mke2fs; do
    [ -x "$b" ] || { fail "binary $b missing (build it, or scripts/install-deps.sh)"; finish; }
done
if ldd "$TARGET" | grep -q libasan; then
    echo "# note: $TARGET is an ASan build; the guest test is meant for the optimised build"
fi

KERNEL=$("$SRC/scripts/mkinitramfs.sh" --print-kernel) || { fail "no guest kernel"; finish; }
INITRD=${GUEST_IMAGE_DIR:-$BUILD_DIR/guest-images}/powercut.cpio
guest_initramfs "$INITRD" --init-script "$HERE/powercut-guest.sh" \
    --modules "virtio_blk dm_mod dm_log_writes ext4" \
    --bin "$TARGET" --bin "$LOAD" --bin "$DMSETUP" --bin /usr/sbin/mke2fs \
    --file /etc/mke2fs.conf:/etc/mke2fs.conf

# Slices per case (powercut-guest.sh): data 48 MiB; log 32 MiB for the set-up
# (mkfs, the LUN file) and 20 KiB per write (at most 4 blocks of 4 KiB, a
# header each and a mark), at least 96 MiB; journal 4 MiB per 50,000 writes.
NCASES=$(echo "$CASES" | tr , '\n' | wc -l)
LOG_MIB=$((32 + WRITES * 20 / 1024)) JOURNAL_MIB=$((4 + WRITES / 12500))
[ "$LOG_MIB" -ge 96 ] || LOG_MIB=96
truncate -s $((NCASES * 48))M "$WORK/data.img"
truncate -s $((NCASES * LOG_MIB))M "$WORK/log.img"
truncate -s $((NCASES * JOURNAL_MIB))M "$WORK/journal.img"
# One request queue per disk: with one per vCPU, Linux runs a flush state
# machine per queue and two flushes can complete out of order, which
# dm-log-writes then logs in the wrong order (the writes a flush covers come
# after a later flush that completed first).
disk() {   # file serial
    echo -blockdev "driver=file,filename=$1,node-name=$2,cache.direct=off"
    echo -device "virtio-blk-pci,drive=$2,serial=$2,num-queues=1"
}
# no_timer_check: on a loaded host TCG can miss the kernel's IO-APIC timer
# check, which then panics at boot (seen once at load 17).
# shellcheck disable=SC2046  # disk prints words meant to be split
"$HERE/run-qemu.sh" --initrd "$INITRD" --kernel "$KERNEL" --log "$WORK/guest.log" \
    --timeout $((300 + WRITES * NCASES / 20)) ${CONSOLE[@]+"${CONSOLE[@]}"} \
    --append "no_timer_check guest.log_mib=$LOG_MIB guest.journal_mib=$JOURNAL_MIB guest.target=$TARGET guest.load=$LOAD guest.writes=$WRITES guest.blocks=$BLOCKS guest.cases=$CASES" \
    -- $(disk "$WORK/data.img" pcdata) $(disk "$WORK/log.img" pclog) \
    $(disk "$WORK/journal.img" pcjournal)
rc=$?
relay_kernel_guest "$WORK/guest.log" "$rc"

# check NAME SLOT [CHECKER-ARGS]: runs the checker on the case's log and
# journal; its output in OUT, its status in CRC, the cut points in CUTS.
check() {
    OUT=$(python3 "$HERE/powercut-check.py" --name "$1" --log "$WORK/log.img" \
        --log-offset $(($2 * LOG_MIB << 20)) --journal "$WORK/journal.img" \
        --journal-offset $(($2 * JOURNAL_MIB << 20)) "${@:3}")
    CRC=$?
    CUTS=$(echo "$OUT" | sed -n 's/^CUTS \([0-9]*\) VIOLATIONS.*/\1/p')
    echo "$OUT" | grep '^#'
}
TOTAL=0
slot=0
for name in $(echo "$CASES" | tr , ' '); do
    case "$name" in
    ram) ;;
    fault-*)
        check "$name" "$slot"
        if [ "$CRC" = 1 ]; then
            pass "$name: the checker finds the violations of flushes acknowledged unflushed"
        else
            fail "$name: the checker should report violations (status $CRC)"
        fi ;;
    *)
        check "$name" "$slot"
        if [ "$CRC" = 0 ]; then
            pass "$name: ${CUTS:-0} cut points, no violation"
            TOTAL=$((TOTAL + CUTS))
        else
            fail "$name: the checker's status $CRC"
        fi
        case "$name" in *-wce-off) ;; *)
            check "$name/lose-cache" "$slot" --mutate lose-cache
            if [ "$CRC" = 1 ]; then
                pass "$name/lose-cache: the checker finds violations when the cache is lost"
            else
                fail "$name/lose-cache: the checker should report violations (status $CRC)"
            fi ;;
        esac ;;
    esac
    slot=$((slot + 1))
done
if [ "$TOTAL" -ge 1000 ]; then
    pass "$TOTAL cut points checked without violation in $(($(date +%s) - START)) s"
else
    fail "only $TOTAL cut points checked without violation (want >= 1000)"
fi
[ "$FAILED" = 0 ] || KEEP=1
finish

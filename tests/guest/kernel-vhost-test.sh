#!/bin/bash
# Guest test of the kernel vhost-scsi path.  The host has no vhost or target
# modules, so this boots the Debian guest kernel under TCG with
# vhost-scsi-ctl, kernel-vhost-probe (from the build dir, with their shared
# libraries), the target/vhost kernel modules and the module index files in
# the initramfs; tests/guest/kernel-vhost-guest.sh then configures LIO with
# vhost-scsi-ctl (which loads the modules through libkmod), runs the probe
# against /dev/vhost-scsi through the project's vhost front-end library and
# checks delete/restore leave configfs clean.  The block LUN is a scsi-hd
# disk QEMU gives the guest; afterwards this script checks the probe's
# pattern reached that disk's image on the host.  Prints TAP.
#
# Usage: tests/guest/kernel-vhost-test.sh [--build-dir DIR] [--keep] [--console]
#   --build-dir DIR   meson build dir (default $BUILD_DIR or build; use an
#                     optimised build, not ASan, inside the guest)
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
BLK_BYTES=$((16 << 20))
guest_parse_args "$@"
guest_work_dir kernel-vhost

CTL=$BUILD_DIR/tools/vhost-scsi-ctl
PROBE=$BUILD_DIR/tests/guest/kernel-vhost-probe
for b in "$CTL" "$PROBE"; do
    [ -x "$b" ] || { fail "binary $b missing (build it first)"; finish; }
done
if ldd "$CTL" | grep -q libasan; then
    echo "# note: $CTL is an ASan build; the guest test is meant for the optimised build"
fi

KERNEL=$("$SRC/scripts/mkinitramfs.sh" --print-kernel) || { fail "no guest kernel"; finish; }
KVER=${KERNEL#/boot/vmlinuz-}

FILES=()
guest_module_files "$KVER" vhost_scsi target_core_file target_core_iblock

INITRD=${GUEST_IMAGE_DIR:-$BUILD_DIR/guest-images}/kernel-vhost.cpio
guest_initramfs "$INITRD" --kver "$KVER" \
    --init-script "$HERE/kernel-vhost-guest.sh" --bin "$CTL" --bin "$PROBE" \
    "${FILES[@]}"

BLK=$WORK/blk.img
truncate -s "$BLK_BYTES" "$BLK"
"$HERE/run-qemu.sh" --initrd "$INITRD" --kernel "$KERNEL" --log "$WORK/guest.log" \
    --timeout 400 ${CONSOLE[@]+"${CONSOLE[@]}"} -- \
    -device virtio-scsi-pci,id=vs0 \
    -blockdev "driver=file,filename=$BLK,node-name=blk0,cache.direct=off" \
    -device scsi-hd,bus=vs0.0,drive=blk0,serial=kvblk
rc=$?

relay_kernel_guest "$WORK/guest.log" "$rc"

# LUN 1 (iblock on the scsi-hd) got the probe's pattern: word at byte 0 is
# (lun << 56) ^ offset ^ 0x5a5aa5a5c3c33c3c, little-endian.
first=$(od -An -tx1 -N8 "$BLK" | tr -d ' \n')
last=$(od -An -tx1 -j $((BLK_BYTES - 8)) -N8 "$BLK" | tr -d ' \n')
want_last=$(printf '%016x' $(( (1 << 56) ^ (BLK_BYTES - 8) ^ 0x5a5aa5a5c3c33c3c )) |
            sed 's/../& /g' | awk '{for (i = NF; i > 0; i--) printf "%s", $i}')
if [ "$first" = 3c3cc3c3a5a55a5b ] && [ "$last" = "$want_last" ]; then
    pass "host image of the iblock LUN holds the probe's data (first and last word)"
else
    fail "host image of the iblock LUN: first $first last $last (want 3c3cc3c3a5a55a5b, $want_last)"
fi
[ "$FAILED" = 0 ] || KEEP=1
finish

#!/bin/bash
# Guest test: the qtest scenarios 1-4 (bring-up, MSI-X, vector
# (un)assignment/INTx/reset with vectors set, resets with requests in
# flight) against QEMU's `-device vhost-scsi-pci,wwpn=...`, i.e. the
# kernel's vhost-scsi.  The host has no vhost or target modules, so this
# boots the Debian guest kernel under TCG with an initramfs holding
# qemu-system-x86_64 (with its shared libraries and kvmvapic.bin, the only
# data file it reads with -bios given and romfile= empty), the qtest
# program, vhost-scsi-ctl and the target/vhost modules with the index files
# libkmod needs; tests/guest/kernel-qtest-guest.sh then sets up LIO and runs
# each scenario in a nested QEMU (TCG inside TCG: its vCPU only halts, the
# cost is QEMU's own code running emulated).  Prints TAP.
#
# Usage: tests/guest/kernel-qtest-test.sh [--build-dir DIR] [--keep] [--console]
#   --build-dir DIR   meson build dir (default $BUILD_DIR or build; use an
#                     optimised build, not ASan, inside the guest)
#   --keep            keep the work directory (guest console log)
#   --console         copy the guest console to stdout while it runs
# KQTEST_TIMEOUT (seconds, default 540) bounds the guest run; QEMU= picks the
# QEMU binary that goes into the guest.
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
guest_parse_args "$@"
guest_work_dir kernel-qtest

CTL=$BUILD_DIR/tools/vhost-scsi-ctl
QTEST=$BUILD_DIR/tests/qtest/virtio-scsi-qtest
# The guest runs the QEMU the host tests use (QEMU= selects another).
QEMU_BIN=$(readlink -f "$(command -v "${QEMU:-qemu-system-x86_64}")")
VAPIC=/usr/share/qemu/kvmvapic.bin
for b in "$CTL" "$QTEST" "$QEMU_BIN"; do
    [ -x "$b" ] || { fail "binary $b missing (build it first)"; finish; }
done
[ -r "$VAPIC" ] || { fail "$VAPIC missing (qemu-system-data)"; finish; }
if ldd "$QTEST" | grep -q libasan; then
    echo "# note: $QTEST is an ASan build; the guest test is meant for the optimised build"
fi

KERNEL=$("$SRC/scripts/mkinitramfs.sh" --print-kernel) || { fail "no guest kernel"; finish; }
KVER=${KERNEL#/boot/vmlinuz-}

FILES=(--file "$VAPIC:$VAPIC")
guest_module_files "$KVER" vhost_scsi target_core_file target_core_iblock

INITRD=${GUEST_IMAGE_DIR:-$BUILD_DIR/guest-images}/kernel-qtest.cpio
guest_initramfs "$INITRD" --kver "$KVER" \
    --init-script "$HERE/kernel-qtest-guest.sh" --bin "$CTL" --bin "$QTEST" \
    --bin "$QEMU_BIN" "${FILES[@]}"

start=$(date +%s)
# 2 GiB: the initramfs (~100 MiB) lives in RAM, each inner QEMU has 256 MiB.
"$HERE/run-qemu.sh" --initrd "$INITRD" --kernel "$KERNEL" --log "$WORK/guest.log" \
    --mem 2G --smp 2 --timeout "${KQTEST_TIMEOUT:-540}" ${CONSOLE[@]+"${CONSOLE[@]}"}
rc=$?
echo "# guest ran for $(($(date +%s) - start))s"

relay_kernel_guest "$WORK/guest.log" "$rc"
[ "$FAILED" = 0 ] || KEEP=1
finish

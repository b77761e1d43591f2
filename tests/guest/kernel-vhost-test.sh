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
SRC=$(cd "$HERE/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
KEEP=0 CONSOLE=()
BLK_BYTES=$((16 << 20))

usage() { sed -n '/^# Usage:/,/^# SPDX/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --console) CONSOLE=(--console); shift ;;
    -h|--help) usage ;;
    *) echo "unknown option $1" >&2; usage ;;
    esac
done
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$SRC/$BUILD_DIR ;; esac

N=0 FAILED=0
pass() { N=$((N + 1)); echo "ok $N - $*"; }
fail() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $*"; }
finish() { echo "1..$N"; [ "$FAILED" = 0 ]; exit $?; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kernel-vhost.XXXXXX")
cleanup() {
    if [ "$KEEP" = 1 ]; then echo "# work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

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

# vhost-scsi-ctl loads the modules itself, so they go in as plain files at
# their usual paths with the index files libkmod resolves names with.
FILES=()
declare -A seen=()
for m in vhost_scsi target_core_file target_core_iblock; do
    while read -r kind path _; do
        [ "$kind" = insmod ] && [ -z "${seen[$path]:-}" ] || continue
        seen[$path]=1
        FILES+=(--file "$path:$path")
    done < <(modprobe -S "$KVER" --show-depends "$m" 2>&1)
done
for f in /lib/modules/"$KVER"/modules.*; do
    FILES+=(--file "$f:$f")
done

INITRD=${GUEST_IMAGE_DIR:-$BUILD_DIR/guest-images}/kernel-vhost.cpio
if "$SRC/scripts/mkinitramfs.sh" --out "$INITRD" --kver "$KVER" \
        --init-script "$HERE/kernel-vhost-guest.sh" --bin "$CTL" --bin "$PROBE" \
        "${FILES[@]}" >"$WORK/mkinitramfs.log" 2>&1; then
    pass "initramfs ready ($INITRD)"
else
    fail "initramfs build"; sed 's/^/# /' "$WORK/mkinitramfs.log"; finish
fi

BLK=$WORK/blk.img
truncate -s "$BLK_BYTES" "$BLK"
"$HERE/run-qemu.sh" --initrd "$INITRD" --kernel "$KERNEL" --log "$WORK/guest.log" \
    --timeout 400 ${CONSOLE[@]+"${CONSOLE[@]}"} -- \
    -device virtio-scsi-pci,id=vs0 \
    -blockdev "driver=file,filename=$BLK,node-name=blk0,cache.direct=off" \
    -device scsi-hd,bus=vs0.0,drive=blk0,serial=kvblk
rc=$?

while IFS= read -r line; do
    case "$line" in
    "ok "*) pass "guest: ${line#ok*- }" ;;
    "not ok "*) fail "guest: ${line#not ok*- }" ;;
    "# "*) echo "$line" ;;
    esac
done < <(tr -d '\r' <"$WORK/guest.log")
case "$rc" in
0) pass "guest finished, all its checks passed" ;;
124|125) fail "guest did not finish (run-qemu status $rc)"
         tr -d '\r' <"$WORK/guest.log" | tail -n 40 | sed 's/^/# console: /' ;;
*) fail "guest reported $rc failures" ;;
esac

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

#!/bin/bash
# Guest test of an iSCSI LUN: a private tgtd (tgt.sh) exports a 512 MiB
# file, vhost-scsi-target serves it as LUN 0 (iscsi://) next to a ram LUN,
# and tests/guest/vhost-user-guest-test.sh boots Linux on it and runs its
# checks (geometry, INQUIRY/VPD, fio write+verify, a reset with I/O in
# flight, a second boot that finds the data intact).  Prints that script's
# TAP; skips when tgtd or root is missing.
#
# Usage: tests/iscsi/iscsi-guest-test.sh [vhost-user-guest-test.sh options]
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
IQN=iqn.2026-12.org.vhost-scsi.test:guest

if ! command -v tgtd >/dev/null || [ "$(id -u)" != 0 ]; then
    echo "1..0 # SKIP needs tgtd (package tgt) and root"
    exit 0
fi

# For a sanitizer build: see lsan.supp.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$HERE/lsan.supp:print_suppressions=0}
WORK=$(mktemp -d /tmp/vhost-scsi-iscsi-guest.XXXXXX)
TGTD_PID=
cleanup() {
    [ -n "$TGTD_PID" ] && kill -9 "$TGTD_PID" 2>/dev/null && wait "$TGTD_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# A free loopback port (bind port 0 and read it) and a private control port.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
CTL=$((10000 + RANDOM % 22000))
truncate -s 512M "$WORK/disk.img"
"$HERE/tgt.sh" run "$PORT" "$CTL" >"$WORK/tgtd.log" 2>&1 &
TGTD_PID=$!
if ! "$HERE/tgt.sh" setup "$CTL" 1 "$IQN" "$WORK/disk.img" >"$WORK/setup.log" 2>&1; then
    echo "1..1"
    echo "not ok 1 tgtd on 127.0.0.1:$PORT"
    sed 's/^/# /' "$WORK/setup.log" "$WORK/tgtd.log"
    exit 1
fi
echo "# tgtd pid $TGTD_PID on 127.0.0.1:$PORT exports $IQN"
"$SRC/tests/guest/vhost-user-guest-test.sh" --lun0-bytes 512M \
    --lun0-spec "iscsi://127.0.0.1:$PORT/$IQN/1" "$@"

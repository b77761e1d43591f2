#!/bin/bash
# Guest tests of RBD LUNs, run inside tests/ceph/rbd-test.sh (which starts
# the throwaway cluster and sets CEPH_CONF):
#   fio   a 512 MiB image as LUN 0: tests/guest/vhost-user-guest-test.sh
#         boots Linux on it and runs its checks (geometry, INQUIRY/VPD, fio
#         write + crc32c verify, a reset with I/O in flight, a second boot
#         that finds the data intact)
#   live  tests/guest/live-lun-guest-test.sh with LUN 2 an RBD image added
#         through the control socket (an open off the main thread) and grown
#         by `rbd resize` from outside: the guest sees the new size
# Prints that script's TAP.
#
# Usage: tests/ceph/rbd-guest-test.sh fio|live [guest test options]
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
if [ -z "${CEPH_CONF:-}" ]; then
    echo "1..0 # SKIP run through tests/ceph/rbd-test.sh (it starts the cluster)"
    exit 0
fi
rbdc() { timeout 120 rbd -c "$CEPH_CONF" "$@"; }
what=${1:-}; shift
case "$what" in
fio)
    rbdc create rbd/guest --size 512M || { echo "1..1"; echo "not ok 1 rbd create"; exit 1; }
    exec "$SRC/tests/guest/vhost-user-guest-test.sh" --lun0-bytes 512M \
        --lun0-spec "rbd:rbd/guest,conf=$CEPH_CONF" "$@"
    ;;
live)
    rbdc create rbd/live --size 64M || { echo "1..1"; echo "not ok 1 rbd create"; exit 1; }
    exec "$SRC/tests/guest/live-lun-guest-test.sh" \
        --lun2-spec "rbd:rbd/live,conf=$CEPH_CONF" \
        --lun2-grow "timeout 120 rbd -c $CEPH_CONF resize rbd/live --size 96M" "$@"
    ;;
*)
    echo "usage: rbd-guest-test.sh fio|live [options]" >&2; exit 2 ;;
esac

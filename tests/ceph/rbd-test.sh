#!/bin/bash
# Runs a test program (rbd-test, or a guest test) against a throwaway Ceph
# cluster: starts one with ceph-cluster.sh in a temporary directory, runs
# the program with CEPH_CONF, CEPH_CLUSTER_DIR, CEPH_CLUSTER_SH and
# CEPH_CLUSTER_OSDS set (CEPH_OSDS OSDs, 1-3, default 1; the pool's size),
# and tears the cluster down on exit, whatever happened.  Prints the
# program's TAP; "1..0 # SKIP" with the reason when Ceph's packages are
# not installed, "not ok" when the cluster does not start.
#
# Usage: tests/ceph/rbd-test.sh PROGRAM [ARGS...]
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
for b in ceph-mon ceph-osd ceph rbd; do
    if ! command -v "$b" >/dev/null; then
        echo "1..0 # SKIP $b not installed (apt-get install ceph-mon ceph-osd ceph-common)"
        exit 0
    fi
done
WORK=$(mktemp -d /tmp/vhost-scsi-ceph.XXXXXX)
cleanup() {
    "$HERE/ceph-cluster.sh" stop "$WORK/cluster" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
if ! CEPH_CONF=$("$HERE/ceph-cluster.sh" start "$WORK/cluster" "${CEPH_OSDS:-1}" 2>"$WORK/start.log"); then
    echo "1..1"
    echo "not ok 1 a Ceph cluster on 127.0.0.1"
    sed 's/^/# /' "$WORK/start.log"
    tail -20 "$WORK"/cluster/*.log 2>/dev/null | sed 's/^/# /'
    exit 1
fi
export CEPH_CONF CEPH_CLUSTER_DIR=$WORK/cluster CEPH_CLUSTER_SH=$HERE/ceph-cluster.sh
export CEPH_CLUSTER_OSDS=${CEPH_OSDS:-1}
echo "# Ceph cluster of $CEPH_CLUSTER_OSDS OSD(s) in $CEPH_CLUSTER_DIR"
"$@"

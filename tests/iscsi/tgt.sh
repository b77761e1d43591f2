#!/bin/bash
# A private tgtd (the userspace iSCSI target from Debian's "tgt" package)
# for the iSCSI tests and for trying the iSCSI backend by hand.  Each
# instance has its own portal port and control port, so several can run
# next to a system tgtd.  tgt exposes a controller at LUN 0; disks start
# at LUN 1.
#
#   tgt.sh run PORT CTLPORT
#       exec tgtd in the foreground on 127.0.0.1:PORT (the caller owns the pid)
#   tgt.sh setup CTLPORT TID IQN BACKING-FILE [CHAP-USER CHAP-PASSWORD [VENDOR PRODUCT SERIAL]]
#       wait for that tgtd, then create target TID named IQN with LUN 1 on
#       BACKING-FILE, open to all initiators, with CHAP if a user is given
#       ("" "" for none) and the given INQUIRY identity
#   tgt.sh update CTLPORT TID PARAMS
#       change LUN 1's parameters, e.g. readonly=1
#
# Example (two shells):
#   tests/iscsi/tgt.sh run 3260 7001
#   truncate -s 1G /tmp/disk.img
#   tests/iscsi/tgt.sh setup 7001 1 iqn.2026-12.org.example:disk1 /tmp/disk.img
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -euo pipefail

die() { echo "tgt.sh: $*" >&2; exit 1; }

cmd=${1:-}
case "$cmd" in
run)
    [ $# -eq 3 ] || die "usage: tgt.sh run PORT CTLPORT"
    command -v tgtd >/dev/null || die "tgtd not found (apt-get install tgt)"
    exec tgtd -f --iscsi "portal=127.0.0.1:$2" -C "$3"
    ;;
setup)
    [ $# -ge 5 ] || die "usage: tgt.sh setup CTLPORT TID IQN BACKING [USER PASSWORD [VENDOR PRODUCT SERIAL]]"
    ctl=$2 tid=$3 iqn=$4 backing=$5 user=${6:-} pass=${7:-}
    adm() { tgtadm -C "$ctl" --lld iscsi "$@"; }
    # tgtd answers on its control socket once it is ready: poll for ~10 s.
    for _ in $(seq 100); do
        if adm --op show --mode sys >/dev/null 2>&1; then
            break
        fi
        sleep 0.1
    done
    adm --op show --mode sys >/dev/null || die "tgtd on control port $ctl is not answering"
    adm --op new --mode target --tid "$tid" -T "$iqn"
    adm --op new --mode logicalunit --tid "$tid" --lun 1 -b "$backing"
    if [ $# -ge 10 ]; then
        adm --op update --mode logicalunit --tid "$tid" --lun 1 \
            --params "vendor_id=$8,product_id=$9,scsi_sn=${10}"
    fi
    adm --op bind --mode target --tid "$tid" -I ALL
    if [ -n "$user" ]; then
        # tgt keeps accounts per daemon; a second target may reuse one.
        adm --op new --mode account --user "$user" --password "$pass" 2>/dev/null || true
        adm --op bind --mode account --tid "$tid" --user "$user"
    fi
    ;;
update)
    [ $# -eq 4 ] || die "usage: tgt.sh update CTLPORT TID PARAMS"
    tgtadm -C "$2" --lld iscsi --op update --mode logicalunit --tid "$3" --lun 1 --params "$4"
    ;;
*)
    die "usage: tgt.sh run|setup|update ... (see the top of this file)"
    ;;
esac

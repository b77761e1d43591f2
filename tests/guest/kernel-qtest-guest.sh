#!/bin/sh
# Runs inside the kernel-qtest guest as /test.sh (busybox sh): creates an
# LIO vhost target with `vhost-scsi-ctl lio` (it loads the modules with
# libkmod and mounts configfs itself) whose TPG 0 holds one 64 MiB fileio
# LUN 0 on tmpfs -- TPG 0 because the qtest driver addresses target 0, one
# LUN because the 6.1 kernel must not see several LUNs on a TPG (see
# docs/kernel-vhost.md) -- then runs each qtest scenario of the "kernel"
# flavour as its own process against `-device vhost-scsi-pci,wwpn=...` (a
# nested QEMU under TCG), and finally checks that the target can be deleted
# (no QEMU left holding /dev/vhost-scsi) and that the kernel logged no
# BUG/WARNING.  Prints TAP lines (numbered by the host script that relays
# them); exit status = number of failures.
#
# SPDX-License-Identifier: GPL-2.0-or-later

QTEST=virtio-scsi-qtest
# DISK_SIZE of tests/qtest/virtio-scsi-test.c: READ CAPACITY must match it.
LUN_BYTES=67108864
SCENARIOS="bring-up
bring-up-with-rings-smaller-than-maximum
msix/per-queue-vectors
msix/masked-vector-sets-pba-then-fires-on-unmask
msix/vectors-unassigned-before-driver-ok
msix/disabled-uses-intx-isr
msix/device-reset-with-vectors-set
reset/device-reset-with-requests-in-flight
reset/system-reset-with-requests-in-flight"
FAILED=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; FAILED=$((FAILED + 1)); }

W=$(vhost-scsi-ctl lio create --tpgt 0 2>/tmp/err); rc=$?
if [ $rc = 0 ] && [ -d "/sys/kernel/config/target/vhost/$W/tpgt_0" ]; then
    ok "lio create made $W tpgt 0"
else
    notok "lio create (exit $rc)"; sed 's/^/# /' /tmp/err; exit $FAILED
fi
if vhost-scsi-ctl lio lun add "$W" 0 "file:/tmp/lun0.img,size=$LUN_BYTES" --tpgt 0 2>/tmp/err; then
    ok "lun add 0 fileio ($LUN_BYTES bytes)"
else
    notok "lun add 0"; sed 's/^/# /' /tmp/err; exit $FAILED
fi
if [ -c /dev/vhost-scsi ]; then ok "/dev/vhost-scsi exists"; else notok "no /dev/vhost-scsi"; exit $FAILED; fi

export VHOST_SCSI_WWPN=$W
echo "# $(qemu-system-x86_64 --version | head -n 1), kernel $(uname -r)"
t_all=$(date +%s)
for s in $SCENARIOS; do
    t0=$(date +%s)
    "$QTEST" --tap -p "/qtest/kernel/$s" >/tmp/qtest.out 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
    if [ $rc = 0 ] && grep -q "^ok 1 /qtest/kernel/$s\$" /tmp/qtest.out; then
        ok "qtest kernel/$s (${secs}s)"
        # What a scenario noted about the kernel's behaviour (g_test_message).
        grep '^# ' /tmp/qtest.out | grep -v -e '^# Start of' -e '^# End of' -e '^# random seed'
    else
        notok "qtest kernel/$s (exit $rc, ${secs}s)"
        sed 's/^/# /' /tmp/qtest.out
    fi
done
echo "# qtest scenarios took $(($(date +%s) - t_all))s"

# Every inner QEMU is gone: nothing holds /dev/vhost-scsi, so delete works.
if vhost-scsi-ctl lio delete "$W" 2>/tmp/err; then
    ok "lio delete after the scenarios (no QEMU left holding the endpoint)"
else
    notok "lio delete"; sed 's/^/# /' /tmp/err
fi
if dmesg | grep -E 'BUG|WARNING|list_del corruption|Oops' >/tmp/dmesg.bad; then
    notok "kernel log is clean"; sed 's/^/# dmesg: /' /tmp/dmesg.bad
else
    ok "kernel log has no BUG/WARNING/Oops"
fi
exit $FAILED

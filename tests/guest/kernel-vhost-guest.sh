#!/bin/sh
# Runs inside the kernel-vhost test guest as /test.sh (busybox sh): sets up
# an LIO vhost target with `vhost-scsi-ctl lio` (it loads the modules with
# libkmod and mounts configfs itself), a fileio LUN on tmpfs and an iblock
# LUN on the virtio-scsi disk QEMU gives the guest (both given as file:, the
# daemon's grammar), drives it through /dev/vhost-scsi with
# kernel-vhost-probe, then deletes, restores and deletes again, checking
# configfs is left clean.  A second target gets ram: and null: LUNs
# (rd_mcp) and goes through save/restore; a third a read-only iblock LUN.  Prints TAP lines (numbered by the
# host script that relays them); exit status = number of failures.
#
# SPDX-License-Identifier: GPL-2.0-or-later

CF=/sys/kernel/config
FILE_BYTES=${GUEST_FILE_BYTES:-8388608}
FAILED=0
ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; FAILED=$((FAILED + 1)); }
t() {  # t DESCRIPTION COMMAND...: passes when the command succeeds
    d=$1; shift
    if out=$("$@" 2>&1); then ok "$d"; else notok "$d"; echo "$out" | sed 's/^/# /'; fi
}
tfail() {  # tfail DESCRIPTION STATUS COMMAND...: passes when the command exits STATUS
    d=$1; want=$2; shift 2
    out=$("$@" 2>&1); rc=$?
    if [ $rc = "$want" ]; then ok "$d"; else notok "$d (exit $rc, want $want)"; fi
    echo "$out" | sed 's/^/# stderr: /'
}
# No target dirs and no backstore of ours may remain.
clean() {
    [ -z "$(ls "$CF/target/vhost" 2>/dev/null | grep -v -e '^version$' -e '^discovery_auth$')" ] &&
        [ -z "$(ls "$CF/target/core" 2>/dev/null | grep -E '^(fileio|iblock|rd_mcp)_')" ]
}

# The block LUN: the first SCSI disk (QEMU's scsi-hd); the scan is async.
i=0
while [ ! -e /sys/block/sda ] && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
BLK=/dev/sda
BLK_BYTES=$(( $(cat /sys/block/sda/size 2>/dev/null || echo 0) * 512 ))
[ "$BLK_BYTES" -gt 0 ] && ok "block device $BLK ($BLK_BYTES bytes)" || notok "no /dev/sda"

W=$(vhost-scsi-ctl lio create 2>/tmp/err); rc=$?
if [ $rc = 0 ] && [ -d "$CF/target/vhost/$W/tpgt_1" ]; then
    ok "lio create made $W (modules loaded, configfs mounted)"
else
    notok "lio create (exit $rc)"; sed 's/^/# /' /tmp/err; exit 1
fi
[ -c /dev/vhost-scsi ] && ok "/dev/vhost-scsi exists" || notok "/dev/vhost-scsi missing"
NEXUS=$(cat "$CF/target/vhost/$W/tpgt_1/nexus")
t "lio create again is a no-op" vhost-scsi-ctl lio create "$W"
[ "$(cat "$CF/target/vhost/$W/tpgt_1/nexus")" = "$NEXUS" ] &&
    ok "nexus kept: $NEXUS" || notok "nexus changed"

t "lun add 0 fileio on tmpfs" vhost-scsi-ctl lio lun add "$W" 0 "file:/tmp/lun0.img,size=$FILE_BYTES"
# One LUN per TPG: on this 6.1 kernel a LUN reset on a multi-LUN TPG corrupts
# its TMF list and unmapping the LUNs later crashes (fixed in Linux 6.4).
t "create tpgt 2" vhost-scsi-ctl lio create "$W" --tpgt 2
t "lun add 1 file:$BLK is iblock (tpgt 2)" vhost-scsi-ctl lio lun add "$W" 1 "file:$BLK" --tpgt 2
[ -d "$CF/target/core/iblock_0/vs-$(echo "$W" | tr . _)-t2-l1" ] && ok "the block device got an iblock backstore" ||
    { notok "no iblock backstore for $BLK"; ls "$CF/target/core" | sed 's/^/# /'; }
t "lun add 0 again is a no-op" vhost-scsi-ctl lio lun add "$W" 0 "file:/tmp/lun0.img,size=$FILE_BYTES"
tfail "lun add 0 with another file is refused" 1 \
    vhost-scsi-ctl lio lun add "$W" 0 "file:/tmp/other.img,size=1M"
tfail "lun add of a file already backing a LUN is refused" 1 \
    vhost-scsi-ctl lio lun add "$W" 2 "file:/tmp/lun0.img"
tfail "lun add 16384 is a usage error" 2 vhost-scsi-ctl lio lun add "$W" 16384 "file:/tmp/x.img,size=1M"
vhost-scsi-ctl lio list | sed 's/^/# /'
# Whitespace dropped: json-glib puts each member on a line of its own.
if vhost-scsi-ctl lio list --json | tr -d ' \n' | grep -q "\"path\":\"$BLK\",\"size\":$BLK_BYTES,"; then
    ok "list --json reports the iblock LUN with its size"
else
    notok "list --json"
fi
t "save" vhost-scsi-ctl lio save /tmp/saved.json

# The probe holds the endpoint while it asks vhost-scsi-ctl to delete.
kernel-vhost-probe --wwpn "$W" --tpgt 1 --queues 2 --depth 8 \
    --lun "0:FILEIO:$FILE_BYTES:1" --lun "1:IBLOCK:$BLK_BYTES:2" \
    --busy-cmd "vhost-scsi-ctl lio delete $W" 2>/tmp/probe.err
rc=$?
sed 's/^/# probe: /' /tmp/probe.err
[ $rc = 0 ] && ok "kernel-vhost-probe passed" || notok "kernel-vhost-probe (exit $rc)"
[ -d "$CF/target/vhost/$W/tpgt_2/lun/lun_1" ] && ok "refused delete left the target intact" ||
    notok "target damaged by the refused delete"

# ram: and null: are rd_mcp backstores; a RAM LUN serves data like any other.
W2=$(vhost-scsi-ctl lio create 2>/tmp/err) && ok "second target $W2" || notok "second target"
t "lun add ram:4M" vhost-scsi-ctl lio lun add "$W2" 0 ram:4M
t "create $W2 tpgt 2" vhost-scsi-ctl lio create "$W2" --tpgt 2
t "lun add null:64M,block-size=4096" vhost-scsi-ctl lio lun add "$W2" 0 null:64M,block-size=4096 --tpgt 2
NULLBS=$(echo "$CF"/target/core/rd_mcp_*/vs-*-t2-l0)
grep -q "nullio: 1" "$NULLBS/info" && [ "$(cat "$NULLBS/attrib/block_size")" = 4096 ] &&
    ok "null LUN: rd_nullio=1, block_size 4096" ||
    { notok "null LUN attributes"; cat "$NULLBS/info" "$NULLBS/attrib/block_size" | sed 's/^/# /'; }
tfail "lun add iscsi:// is refused" 1 vhost-scsi-ctl lio lun add "$W2" 1 iscsi://127.0.0.1/iqn.2024-01.x:t/0
tfail "lun add of a read-only file is refused" 1 vhost-scsi-ctl lio lun add "$W2" 1 "file:/tmp/ro.img,ro,size=1M"
[ ! -e /tmp/ro.img ] && ok "the refused file LUN made no file" || notok "/tmp/ro.img was made"
kernel-vhost-probe --wwpn "$W2" --tpgt 1 --queues 1 --depth 4 --lun "0:RAMDISK:4194304" \
    >/tmp/probe3.out 2>&1 && ok "kernel-vhost-probe passed on the RAM LUN" ||
    { notok "kernel-vhost-probe on the RAM LUN"; sed 's/^/# /' /tmp/probe3.out; }
t "save with ram and null LUNs" vhost-scsi-ctl lio save /tmp/saved2.json
t "lio delete $W2" vhost-scsi-ctl lio delete "$W2"
t "restore ram and null LUNs" vhost-scsi-ctl lio restore /tmp/saved2.json
vhost-scsi-ctl lio save /tmp/resaved2.json
cmp -s /tmp/saved2.json /tmp/resaved2.json && ok "ram and null LUNs restored as saved" ||
    { notok "ram/null restore differs"; diff /tmp/saved2.json /tmp/resaved2.json | sed 's/^/# /'; }
t "lio delete $W2 again" vhost-scsi-ctl lio delete "$W2"

# A second LUN on one TPG draws the pre-6.4 LUN-reset warning (no TMF is
# ever sent to this TPG, so unmapping it below is safe).
t "create tpgt 3" vhost-scsi-ctl lio create "$W" --tpgt 3
t "lun add 0 on tpgt 3" vhost-scsi-ctl lio lun add "$W" 0 "file:/tmp/w0.img,size=1M" --tpgt 3
out=$(vhost-scsi-ctl lio lun add "$W" 1 "file:/tmp/w1.img,size=1M" --tpgt 3 2>&1)
case "$(uname -r)" in
[0-5].*|6.[0-3].*)
    echo "$out" | grep -q "second LUN: on kernel" && ok "second LUN on a TPG warns on $(uname -r)" ||
        { notok "no warning for a second LUN on $(uname -r)"; echo "$out" | sed 's/^/# /'; } ;;
*) ok "second LUN on a TPG warns before kernel 6.4 # SKIP kernel $(uname -r) needs no warning" ;;
esac
t "lio delete" vhost-scsi-ctl lio delete "$W"
clean && ok "configfs clean after delete" || { notok "configfs not clean"; find "$CF/target" | sed 's/^/# /'; }
t "lio delete again is a no-op" vhost-scsi-ctl lio delete "$W"

t "restore" vhost-scsi-ctl lio restore /tmp/saved.json
vhost-scsi-ctl lio save /tmp/resaved.json
cmp -s /tmp/saved.json /tmp/resaved.json && ok "restored configuration equals the saved one" ||
    { notok "restored configuration differs"; diff /tmp/saved.json /tmp/resaved.json | sed 's/^/# /'; }
# Data written by the probe survived the delete/restore cycle.
kernel-vhost-probe --wwpn "$W" --queues 1 --depth 4 --read-only --lun "0:FILEIO:$FILE_BYTES" \
    >/tmp/probe2.out 2>&1
grep -q "^ok .* LUN 0 read-back+compare" /tmp/probe2.out &&
    ok "restored LUN 0 serves the data written before" ||
    { notok "restored LUN 0 data"; sed 's/^/# /' /tmp/probe2.out; }
t "final lio delete" vhost-scsi-ctl lio delete "$W"
clean && ok "configfs clean at the end" || { notok "configfs not clean at the end"; find "$CF/target" | sed 's/^/# /'; }
vhost-scsi-ctl lio list | grep -q "no vhost targets" && ok "list shows no targets" ||
    notok "list after delete"
# ro is iblock's readonly=1.
W3=$(vhost-scsi-ctl lio create 2>/tmp/err) && ok "third target $W3" || notok "third target"
t "lun add file:$BLK,ro" vhost-scsi-ctl lio lun add "$W3" 0 "file:$BLK,ro"
grep -q "readonly: 1" "$CF"/target/core/iblock_*/vs-*-t1-l0/info && ok "iblock readonly: 1" ||
    { notok "iblock not read-only"; cat "$CF"/target/core/iblock_*/*/info | sed 's/^/# /'; }
vhost-scsi-ctl lio list | grep -q " ro$" && ok "list shows the LUN read-only" || notok "list ro"
t "lio delete $W3" vhost-scsi-ctl lio delete "$W3"
clean && ok "configfs clean after all" || { notok "configfs not clean after all"; find "$CF/target" | sed 's/^/# /'; }
exit $FAILED

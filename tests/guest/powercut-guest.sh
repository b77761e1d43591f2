#!/bin/sh
# Runs inside the power-cut test guest (tests/guest/powercut-test.sh): for
# each case, a dm-log-writes device over a slice of the data disk logging to
# a slice of the log disk, vhost-scsi-target serving it (as a block device,
# or a file on ext4 made on it) and powercut-load writing through the
# daemon and marking the log after every acknowledgement; then the device is
# removed (which logs the writes never flushed and an end mark) and the
# journal copied to its slot of the journal disk.  The host replays the logs.
# The ram case instead reads its LUN back while the daemon runs, and again
# after a restart (zeros).  Prints "ok - ..." lines; exits with the number
# of failures.
#
# Kernel arguments (GUEST_*): target, load (binary paths), writes, blocks,
# cases (comma-separated case names, in slot order: see powercut-test.sh),
# log_mib and journal_mib (the slice sizes the host chose).
#
# SPDX-License-Identifier: GPL-2.0-or-later

FAILS=0
ok() { echo "ok - $*"; }
bad() { echo "not ok - $*"; FAILS=$((FAILS + 1)); }

# Slices, in 512-byte sectors: the data and log slices of case I start at
# I * DS and I * LS; journal slots are JS 4 KiB blocks.
DS=$((48 << 11)) LS=$((${GUEST_LOG_MIB:-96} << 11)) JS=$((${GUEST_JOURNAL_MIB:-4} << 8))
TARGET=$GUEST_TARGET LOAD=$GUEST_LOAD
WRITES=${GUEST_WRITES:-600} BLOCKS=${GUEST_BLOCKS:-1024}

disk_by_serial() {
    for d in /sys/block/vd*; do
        [ "$(cat "$d/serial" 2>/dev/null)" = "$1" ] && { echo "/dev/${d##*/}"; return 0; }
    done
    return 1
}
DATA=$(disk_by_serial pcdata) && LOG=$(disk_by_serial pclog) && JDEV=$(disk_by_serial pcjournal) ||
    { bad "the three virtio disks (data, log, journal) are there"; exit 1; }

# start_target SOCK SPEC: the daemon on SOCK serving LUN 0 = SPEC, PID in TPID.
start_target() {
    rm -f "$1"
    "$TARGET" --socket-path "$1" --lun "0=$2" --queues 2 >/tmp/target.log 2>&1 &
    TPID=$!
    i=0
    while [ ! -S "$1" ] && [ $i -lt 200 ] && kill -0 $TPID 2>/dev/null; do
        sleep 0.1; i=$((i + 1))
    done
    [ -S "$1" ]
}
stop_target() {
    kill -TERM "$TPID" 2>/dev/null
    wait "$TPID"
}

dm_majmin() {
    /usr/sbin/dmsetup info -c --noheadings -o major,minor --separator : "$1"
}

run_dm_case() {   # slot name
    slot=$1 name=$2 lw=pclw$1 opts="" wce="" fiemap=""
    case "$name" in *-direct*) opts=,direct ;; esac
    case "$name" in *-wce-off) wce="--wce off" ;; esac
    # Without `direct` every flushing command is an fdatasync; one at a time,
    # so that the log orders each write against the flushes (testing.md).
    case "$name" in *-buffered*) wce="$wce --one-flush" ;; esac
    # No udev here: the tables name devices by major:minor, the rest uses
    # devtmpfs's /dev/dm-N.
    /usr/sbin/dmsetup create "pcd$slot" --table "0 $DS linear $DATA $((slot * DS))" &&
        /usr/sbin/dmsetup create "pcl$slot" --table "0 $LS linear $LOG $((slot * LS))" &&
        /usr/sbin/dmsetup create "$lw" \
            --table "0 $DS log-writes $(dm_majmin "pcd$slot") $(dm_majmin "pcl$slot")" &&
        dev=/dev/dm-$(/usr/sbin/dmsetup info -c --noheadings -o minor "$lw") && [ -b "$dev" ] ||
        { bad "$name: dm-log-writes device"; return; }
    if [ "$name" = fault-flush-dropped ]; then
        # The fault: Linux is told the device has no volatile cache, so the
        # block layer completes every flush (and strips FUA) above
        # dm-log-writes without sending it: SYNCHRONIZE CACHE is
        # acknowledged while nothing was flushed.
        echo "write through" >"/sys/block/${dev#/dev/}/queue/write_cache"
        grep -q "write through" "/sys/block/${dev#/dev/}/queue/write_cache" ||
            { bad "$name: the device says write through"; return; }
    fi
    spec=$dev
    case "$name" in *ext4-*)
        # commit=600: no periodic journal commit, whose flush could be in
        # flight beside an fdatasync's (the log's limit, testing.md).
        mkdir -p "/mnt/$lw"
        /usr/sbin/mke2fs -q -F -t ext4 -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 \
            "$dev" >/tmp/mkfs.log 2>&1 &&
            mount -t ext4 -o commit=600 "$dev" "/mnt/$lw" &&
            dd if=/dev/zero of="/mnt/$lw/lun.img" bs=4096 count="$BLOCKS" conv=fsync 2>/dev/null &&
            sync ||
            { bad "$name: ext4 with a $BLOCKS-block LUN file"; cat /tmp/mkfs.log; return; }
        spec=/mnt/$lw/lun.img
        fiemap="--fiemap $spec"
        ;;
    esac
    case "$name" in
    kernel-*)
        # No target: the same system calls on the device from the workload.
        direct=""
        [ -n "$opts" ] && direct=--device-direct
        # shellcheck disable=SC2086  # $wce and $direct are options or empty
        if "$LOAD" --device "$spec" $direct --journal "/tmp/$lw.journal" --blocks "$BLOCKS" \
            --writes "$WRITES" --qd 8 --seed "$((slot + 1))" --dm "$lw" $wce $fiemap \
            >/tmp/load.log 2>&1; then
            ok "$name: $(grep '^powercut-load:' /tmp/load.log | tail -n 1)"
        else
            bad "$name: workload on $spec"; sed 's/^/# /' /tmp/load.log
        fi ;;
    *)
        if start_target "/tmp/$lw.sock" "file:$spec$opts"; then
            # shellcheck disable=SC2086  # $wce and $fiemap are option pairs or empty
            if "$LOAD" --socket "/tmp/$lw.sock" --journal "/tmp/$lw.journal" \
                --blocks "$BLOCKS" --writes "$WRITES" --qd 8 --seed "$((slot + 1))" \
                --dm "$lw" $wce $fiemap >/tmp/load.log 2>&1; then
                ok "$name: $(grep '^powercut-load:' /tmp/load.log | tail -n 1)"
            else
                bad "$name: workload through file:$spec$opts"; sed 's/^/# /' /tmp/load.log
            fi
            stop_target ||
                { bad "$name: the target stopped cleanly"; sed 's/^/# /' /tmp/target.log; }
        else
            bad "$name: target serving file:$spec$opts"; sed 's/^/# /' /tmp/target.log
        fi ;;
    esac
    case "$name" in *ext4-*) umount "/mnt/$lw" || bad "$name: umount" ;; esac
    sync
    # Removing the device logs the writes never flushed and the end mark.
    /usr/sbin/dmsetup remove "$lw" && /usr/sbin/dmsetup remove "pcd$slot" "pcl$slot" ||
        bad "$name: dm devices removed"
    dd if="/tmp/$lw.journal" of="$JDEV" bs=4096 seek=$((slot * JS)) conv=notrunc,fsync \
        2>/dev/null || bad "$name: journal copied to its slot"
}

run_ram_case() {
    # ram: "a disk in the daemon's memory, zero-filled, lost at exit": it
    # reports no write cache (WCE 0), every acknowledged write reads back
    # while the daemon runs, and a restarted daemon's LUN is zeros again.
    if start_target /tmp/ram.sock "ram:$((BLOCKS * 4))K"; then
        if "$LOAD" --socket /tmp/ram.sock --journal /tmp/ram.journal --blocks "$BLOCKS" \
            --writes "$WRITES" --qd 8 --seed 99 --verify >/tmp/load.log 2>&1 &&
            grep -q "WCE 0, read-back ok" /tmp/load.log; then
            ok "ram: no write cache, every acknowledged write read back: $(tail -n 1 /tmp/load.log)"
        else
            bad "ram: workload and read-back"; sed 's/^/# /' /tmp/load.log
        fi
        stop_target
    else
        bad "ram: target"; sed 's/^/# /' /tmp/target.log
    fi
    if start_target /tmp/ram.sock "ram:$((BLOCKS * 4))K" &&
        "$LOAD" --socket /tmp/ram.sock --journal /tmp/ram0.journal --blocks "$BLOCKS" \
            --check-zero >/tmp/load.log 2>&1; then
        ok "ram: after a restart the LUN is zeros (lost at exit)"
    else
        bad "ram: after a restart the LUN is zeros"; sed 's/^/# /' /tmp/load.log
    fi
    stop_target
}

slot=0
for name in $(echo "$GUEST_CASES" | tr , ' '); do
    if [ "$name" = ram ]; then run_ram_case; else run_dm_case "$slot" "$name"; fi
    slot=$((slot + 1))
done
exit "$FAILS"

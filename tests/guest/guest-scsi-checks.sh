#!/bin/sh
# Runs inside the guest as /test.sh (busybox sh): checks what a Linux
# virtio-scsi initiator sees of two LUNs on one SCSI host and prints one TAP
# line per check.  Expected geometry comes from the kernel command line
# (exported by /init): GUEST_LUN0_BYTES, GUEST_LUN0_BS, GUEST_LUN1_BYTES,
# GUEST_LUN1_BS; GUEST_DISCARD_LUN names the LUN that must accept UNMAP,
# GUEST_SANITIZE_LUN (when set) one that takes SANITIZE.
# GUEST_PHASE=1 runs everything, including a driver unbind/rebind (a virtio
# device reset that stops and restarts the back-end's queues) while I/O is in
# flight, GUEST_RESETS times (default 1); GUEST_PHASE=2 (a second boot against
# the same back-end) checks the LUNs attach again and that the marker written
# in phase 1 survived.  GUEST_PHASE=live asks the host, by "GUEST-WANT: add",
# "resize" and "remove" lines on the console, to change LUN 2 while fio
# writes and verifies LUN 0, and checks Linux follows each change with no
# manual rescan (GUEST_LUN2_BYTES, then GUEST_LUN2_GROWN).  GUEST_PHASE=restart
# pauses a fio job that writes and verifies LUN 0 half-way and asks the host
# ("GUEST-WANT: restart") to hold LUN 2's requests; once the host says so
# with a token in LUN 1, it writes a pattern to LUN 2, which the back-end
# holds until the host kills it and starts a new one; the host writes a
# second token into LUN 1's file while no back-end runs, so the guest knows
# the new one serves once it reads that.  It checks the held write completed
# and reads back from the new back-end, and resumes fio, which must end
# with zero errors, and no I/O error in the kernel log.  Nothing here
# depends on how fast the guest or the host runs: fio is paused across the
# restart by a signal, the held write is held by the host.
#
# SPDX-License-Identifier: GPL-2.0-or-later

N=0
FAILED=0
PHASE=${GUEST_PHASE:-1}
DISCARD_LUN=${GUEST_DISCARD_LUN:-1}
FIO_SIZE=${GUEST_FIO_SIZE:-64M}
# In 4 KiB blocks: 24 MiB into LUN 0, past the 16M verify jobs and before the
# in-flight job (which starts at 32 MiB), so nothing else writes there.
MARKER_SEEK=6144
# busybox sh runs its own applets before searching PATH, and it has a
# blkdiscard of its own: the util-linux one is called by absolute path.

# Each line carries the guest uptime, to see where a slow run spends its time.
up() { cut -d' ' -f1 /proc/uptime; }
pass() { N=$((N + 1)); echo "ok $N - $* [$(up)s]"; }
fail() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $* [$(up)s]"; }
diag() { sed 's/^/# /' "$@"; }

# check DESCRIPTION COMMAND...: run the command, pass/fail on its status,
# show its output as TAP diagnostics when it fails.
check() {
    desc=$1; shift
    if "$@" >/tmp/check.out 2>&1; then
        pass "$desc"
    else
        fail "$desc"
        diag /tmp/check.out
    fi
}

# Prints the sdX name of LUN $1 on the (only) virtio-scsi host, or nothing.
disk_of_lun() {
    for d in /sys/class/scsi_disk/*:*:*:"$1"; do
        [ -d "$d/device/block" ] || continue
        ls "$d/device/block" | head -n 1
        return
    done
}

# Waits up to $2 seconds (default 30) for LUN $1 to get a block device;
# device scanning and sd attachment are asynchronous.
wait_disk() {
    i=0
    while [ $i -lt $((${2:-30} * 10)) ]; do
        dev=$(disk_of_lun "$1")
        if [ -n "$dev" ] && [ -b "/dev/$dev" ]; then echo "$dev"; return 0; fi
        usleep 100000
        i=$((i + 1))
    done
    return 1
}

expect_eq() {  # expect_eq DESC ACTUAL EXPECTED
    if [ "$2" = "$3" ]; then pass "$1 ($2)"; else fail "$1: got '$2', expected '$3'"; fi
}

check_geometry() {  # check_geometry LUN DEV BYTES BS
    lun=$1 dev=$2 bytes=$3 bs=$4
    # /sys/block/X/size counts 512-byte sectors whatever the block size.
    expect_eq "lun$lun $dev capacity in 512-byte sectors" \
        "$(cat /sys/block/$dev/size)" "$((bytes / 512))"
    expect_eq "lun$lun $dev logical block size" \
        "$(cat /sys/block/$dev/queue/logical_block_size)" "$bs"
}

sg_checks() {  # sg_checks LUN DEV BYTES BS
    lun=$1 dev=$2 bytes=$3 bs=$4
    if sg_inq "/dev/$dev" >/tmp/inq.$lun 2>&1 &&
       grep -q 'PDT=0 ' /tmp/inq.$lun &&
       grep -q 'Vendor identification: *[^ ]' /tmp/inq.$lun; then
        pass "lun$lun sg_inq: direct-access device, $(grep 'Vendor identification' /tmp/inq.$lun | tr -s ' ')"
    else
        fail "lun$lun sg_inq"
        diag /tmp/inq.$lun
    fi
    if sg_vpd -p 0x83 "/dev/$dev" >/tmp/vpd83.$lun 2>&1 &&
       grep -q 'designator type:' /tmp/vpd83.$lun; then
        pass "lun$lun sg_vpd -p 0x83 has a designator"
    else
        fail "lun$lun sg_vpd -p 0x83"
        diag /tmp/vpd83.$lun
    fi
    if sg_readcap "/dev/$dev" >/tmp/rc.$lun 2>&1; then
        nblk=$(sed -n 's/.*Number of logical blocks=\([0-9]*\).*/\1/p' /tmp/rc.$lun)
        blen=$(sed -n 's/.*Logical block length=\([0-9]*\) bytes.*/\1/p' /tmp/rc.$lun)
        if [ -n "$nblk" ] && [ "$((nblk * blen))" = "$bytes" ] && [ "$blen" = "$bs" ]; then
            pass "lun$lun sg_readcap: $nblk blocks of $blen bytes"
        else
            fail "lun$lun sg_readcap: ${nblk:-?} blocks of ${blen:-?} bytes, expected $bytes bytes in $bs-byte blocks"
            diag /tmp/rc.$lun
        fi
    else
        fail "lun$lun sg_readcap"
        diag /tmp/rc.$lun
    fi
}

fio_verify() {  # fio_verify DESC DEV SIZE
    # A sized job: fio 3.33 skips the verify phase of time_based jobs.
    if fio --name=verify --filename="/dev/$2" --direct=1 --ioengine=libaio \
           --iodepth=16 --rw=randwrite --bs=4k --size="$3" --verify=crc32c \
           --verify_fatal=1 --do_verify=1 --group_reporting \
           --output-format=terse --terse-version=3 >/tmp/fio.out 2>&1 &&
       ! grep -qi 'verify.*bad\|crc32c.*wanted' /tmp/fio.out; then
        pass "$1"
    else
        fail "$1"
        diag /tmp/fio.out
    fi
}

# fio_job_clean PID OUT DESC WHAT: the background fio job PID (terse output
# in OUT) ended well and found no verify error while WHAT happened.
fio_job_clean() {
    if wait "$1" && ! grep -qi 'verify.*bad\|crc32c.*wanted' "$2"; then
        pass "$3 ran through $4 with zero errors"
    else
        fail "$3 through $4"
        diag "$2"
    fi
}

write_marker() {
    dd if=/dev/urandom of=/tmp/marker bs=4096 count=16 2>/dev/null &&
    dd if=/tmp/marker of="/dev/$1" bs=4096 seek=$MARKER_SEEK conv=fsync 2>/dev/null &&
    md5sum </tmp/marker | cut -d' ' -f1 >/tmp/marker.md5
}

read_marker() {
    dd if="/dev/$1" bs=4096 skip=$MARKER_SEEK count=16 2>/dev/null | md5sum | cut -d' ' -f1
}

# Sector count completed on DEV so far (reads + writes), from /sys/block/X/stat.
io_done() { awk '{ print $1 + $5 }' "/sys/block/$1/stat"; }

# The sgN name of LUN $1 (sg_xcopy wants the SCSI generic devices).
sg_of_lun() {
    for d in /sys/class/scsi_disk/*:*:*:"$1"/device/scsi_generic/*; do
        [ -e "$d" ] && basename "$d" && return
    done
}

# EXTENDED COPY with sg_xcopy: 1 MiB near the end of LUN 0 (past what fio
# and the marker touch) to near the end of LUN 1, moved by the target
# itself, then read back through the page cache dropped.  Only where the
# device reports 3PC (QEMU's own scsi-hd does not) and both LUNs have one
# block size (sg_xcopy copies in one).
xcopy_check() {
    bs=$GUEST_LUN0_BS
    desc="sg_xcopy (EXTENDED COPY) 1 MiB lun0 -> lun1, read back"
    if ! grep -q '3PC=1' /tmp/inq.0; then
        pass "$desc # SKIP the device does not report 3PC"; return
    fi
    if [ "$bs" != "$GUEST_LUN1_BS" ]; then
        pass "$desc # SKIP the LUNs' block sizes differ"; return
    fi
    src=$((GUEST_LUN0_BYTES / 1048576 - 4)) dst=$((GUEST_LUN1_BYTES / 1048576 - 4))
    sg0=$(sg_of_lun 0) sg1=$(sg_of_lun 1)
    if dd if=/dev/urandom of=/tmp/xc bs=1048576 count=1 2>/dev/null &&
       dd if=/tmp/xc of="/dev/$D0" bs=1048576 seek=$src conv=fsync 2>/dev/null &&
       [ -c "/dev/$sg0" ] && [ -c "/dev/$sg1" ] &&
       sg_xcopy if="/dev/$sg0" of="/dev/$sg1" bs="$bs" skip=$((src * 1048576 / bs)) \
           seek=$((dst * 1048576 / bs)) count=$((1048576 / bs)) >/tmp/xcopy.out 2>&1 &&
       sync && echo 3 >/proc/sys/vm/drop_caches &&
       dd if="/dev/$D1" bs=1048576 skip=$dst count=1 2>/dev/null | cmp -s - /tmp/xc; then
        pass "$desc"
    else
        fail "$desc"
        diag /tmp/xcopy.out
    fi
}

# SANITIZE BLOCK ERASE with sg_sanitize --wait (IMMED clear: the command
# lasts the erase; with IMMED sg_sanitize would poll only once a minute):
# 1 MiB of noise written first reads back as zeros, page cache dropped.
sanitize_check() {  # sanitize_check LUN DEV
    desc="lun$1 sg_sanitize --block --wait (SANITIZE BLOCK ERASE) reads zeros"
    sg=$(sg_of_lun "$1")
    if dd if=/dev/urandom of="/dev/$2" bs=1048576 count=1 conv=fsync 2>/dev/null &&
       dd if=/dev/zero of=/tmp/zero bs=1048576 count=1 2>/dev/null &&
       [ -c "/dev/$sg" ] && sg_sanitize --block --wait --quick "/dev/$sg" >/tmp/sanitize.out 2>&1 &&
       echo 3 >/proc/sys/vm/drop_caches &&
       dd if="/dev/$2" bs=1048576 count=1 2>/dev/null | cmp -s - /tmp/zero; then
        pass "$desc"
    else
        fail "$desc"
        diag /tmp/sanitize.out
    fi
}

vdev_of() {  # the virtioN device that hosts DEV
    p=$(readlink -f "/sys/block/$1/device")
    while [ "$p" != / ]; do
        case "${p##*/}" in virtio[0-9]*) echo "${p##*/}"; return ;; esac
        p=${p%/*}
    done
}

# ---------------------------------------------------------------------------

echo "# guest: $(uname -r), phase $PHASE"
D0=$(wait_disk 0) && pass "lun0 attached as $D0" || fail "lun0 attached"
D1=$(wait_disk 1) && pass "lun1 attached as $D1" || fail "lun1 attached"

# Waits up to $2 seconds for the shell condition $1 to hold.
wait_until() {
    i=0
    while [ $i -lt $(($2 * 10)) ]; do
        eval "$1" && return 0
        usleep 100000
        i=$((i + 1))
    done
    return 1
}

if [ "$PHASE" = live ]; then
    # LUN 0 writes and verifies all along: the changes beside it must not hurt it.
    fio --name=steady --filename="/dev/$D0" --direct=1 --ioengine=libaio --iodepth=8 \
        --rw=randwrite --bs=4k --size=32M --verify=crc32c --verify_fatal=1 --do_verify=1 \
        --output-format=terse --terse-version=3 >/tmp/steady.out 2>&1 &
    FIO_PID=$!
    echo "GUEST-WANT: add"
    if D2=$(wait_disk 2 90); then
        pass "hot-added lun2 appears as /dev/$D2 with no manual rescan"
        check_geometry 2 "$D2" "$GUEST_LUN2_BYTES" 512
        fio_verify "lun2 fio write+verify" "$D2" 4M
        echo "GUEST-WANT: resize"
        if wait_until '[ "$(cat /sys/block/$D2/size)" = "$((GUEST_LUN2_GROWN / 512))" ]' 90; then
            pass "grown lun2 shows its new size in /sys/block/$D2/size ($((GUEST_LUN2_GROWN / 512)))"
        else
            fail "grown lun2 shows its new size: $(cat /sys/block/$D2/size), expected $((GUEST_LUN2_GROWN / 512))"
            dmesg | tail -n 20 | sed 's/^/# dmesg: /'
        fi
        echo "GUEST-WANT: remove"
        if wait_until '[ -z "$(disk_of_lun 2)" ] && [ ! -e /sys/block/$D2 ]' 90; then
            pass "removed lun2 disappears (/dev/$D2 gone)"
        else
            fail "removed lun2 disappears"
            dmesg | tail -n 20 | sed 's/^/# dmesg: /'
        fi
    else
        fail "hot-added lun2 appears with no manual rescan"
        dmesg | tail -n 20 | sed 's/^/# dmesg: /'
        echo "GUEST-WANT: done"
    fi
    fio_job_clean $FIO_PID /tmp/steady.out "lun0 fio write+crc32c verify" "the changes"
    echo "1..$N"
    exit $((FAILED > 0))
fi

if [ "$PHASE" = restart ]; then
    D2=$(wait_disk 2) && pass "lun2 attached as $D2" || fail "lun2 attached"
    # Requests wait out the restart (held, or with no back-end): the SCSI
    # layer must not time them out however slowly this machine runs.
    for d in $D0 $D2; do echo 400 >/sys/block/$d/device/timeout; done
    IO_BEFORE=$(io_done "$D0")
    # Sized, not time_based (fio 3.33 skips a time_based job's verify phase).
    fio --name=through --filename="/dev/$D0" --direct=1 --ioengine=libaio --iodepth=16 \
        --rw=randwrite --bs=4k --size=${GUEST_RESTART_FIO:-192M} --verify=crc32c \
        --verify_fatal=1 --do_verify=1 --output-format=terse --terse-version=3 \
        >/tmp/through.out 2>&1 &
    FIO_PID=$!
    # Its first writes have completed before it pauses; it resumes against
    # the new back-end and verifies what the old one wrote.
    wait_until '[ "$(io_done $D0)" -gt $((IO_BEFORE + 256)) ]' 60
    if kill -STOP $FIO_PID 2>/dev/null; then
        pass "lun0's fio paused mid-job across the restart"
    else
        fail "lun0's fio paused mid-job across the restart (it had ended)"
    fi
    echo "GUEST-WANT: restart"
    token() { [ "$(dd if=/dev/$D1 bs=4096 count=1 iflag=direct 2>/dev/null | head -c 16)" = "$1" ]; }
    if wait_until 'token LUN-2-IS-HELD!!!' 120; then
        pass "the host holds lun2's requests"
    else
        fail "the host holds lun2's requests (no token on lun1 within 120 s)"
    fi
    dd if=/dev/urandom of=/tmp/held bs=4096 count=1 2>/dev/null
    dd if=/tmp/held of="/dev/$D2" bs=4096 count=1 oflag=direct 2>/tmp/held.err &
    HELD_PID=$!
    if wait_until 'token RESTARTED-TOKEN!' 120; then
        pass "the new back-end serves: lun1 reads the token written while none ran"
    else
        fail "the new back-end serves (no token on lun1 within 120 s)"
    fi
    kill -CONT $FIO_PID
    if wait_until '! kill -0 $HELD_PID 2>/dev/null' 120 && wait $HELD_PID; then
        pass "lun2's write held by the old back-end completed"
    else
        fail "lun2's write held by the old back-end completed"
        diag /tmp/held.err
    fi
    if dd if="/dev/$D2" bs=4096 count=1 iflag=direct 2>/dev/null | cmp -s - /tmp/held; then
        pass "lun2's held write reads back from the new back-end (resubmitted from the inflight area)"
    else
        fail "lun2's held write reads back from the new back-end"
    fi
    fio_job_clean $FIO_PID /tmp/through.out "lun0 fio write+crc32c verify" "the restart"
    if dmesg | grep -qi 'I/O error\|critical target error\|timing out command'; then
        fail "no I/O error or command timeout in the kernel log"
        dmesg | grep -i 'error\|timing out' | tail -n 10 | sed 's/^/# dmesg: /'
    else
        pass "no I/O error or command timeout in the kernel log"
    fi
    echo "1..$N"
    exit $((FAILED > 0))
fi

if [ "$PHASE" = 2 ]; then
    if [ -n "$D0" ]; then
        check_geometry 0 "$D0" "$GUEST_LUN0_BYTES" "$GUEST_LUN0_BS"
        expect_eq "lun0 data written before the reconnect is still there" \
            "$(read_marker "$D0")" "$GUEST_MARKER_MD5"
        fio_verify "lun0 fio write+verify after the reconnect" "$D0" 16M
    fi
    echo "1..$N"
    exit $((FAILED > 0))
fi

for lun in 0 1; do
    eval dev=\$D$lun
    [ -n "$dev" ] || continue
    eval bytes=\$GUEST_LUN${lun}_BYTES bs=\$GUEST_LUN${lun}_BS
    check_geometry $lun "$dev" "$bytes" "$bs"
    sg_checks $lun "$dev" "$bytes" "$bs"
done
if [ -n "$D0" ] && [ -n "$D1" ]; then
    if cmp -s /tmp/vpd83.0 /tmp/vpd83.1; then
        fail "lun0 and lun1 report different device identifiers"
    else
        pass "lun0 and lun1 report different device identifiers"
    fi
    xcopy_check
fi
if [ -n "${GUEST_SANITIZE_LUN:-}" ]; then
    eval dev=\$D$GUEST_SANITIZE_LUN
    [ -n "$dev" ] && sanitize_check "$GUEST_SANITIZE_LUN" "$dev"
fi

for lun in 0 1; do
    eval dev=\$D$lun
    [ -n "$dev" ] && fio_verify "lun$lun fio randwrite $FIO_SIZE + crc32c verify" "$dev" "$FIO_SIZE"
done

eval DD=\$D$DISCARD_LUN
if [ -n "$DD" ]; then
    mode=$(cat /sys/class/scsi_disk/*:*:*:"$DISCARD_LUN"/provisioning_mode 2>/dev/null)
    expect_eq "lun$DISCARD_LUN provisioning mode is UNMAP" "$mode" unmap
    check "lun$DISCARD_LUN blkdiscard (UNMAP) of the whole LUN" /usr/sbin/blkdiscard -v "/dev/$DD"
    fio_verify "lun$DISCARD_LUN fio write+verify after discard" "$DD" 16M
fi

# Device reset with requests in flight: unbinding virtio_scsi resets the
# virtio device (QEMU stops the vhost-user back-end's rings), rebinding
# re-negotiates features and restarts them.  GUEST_RESETS repeats the cycle.
reset_cycle() {  # reset_cycle N: uses and updates D0, D1
    r="reset $1:"
    VDEV=$(vdev_of "$D0")
    fio --name=inflight --filename="/dev/$D0" --direct=1 --ioengine=libaio \
        --iodepth=32 --rw=randrw --bs=4k --offset=32M --size=128M --time_based --runtime=60 \
        >/tmp/inflight.out 2>&1 &
    FIO_PID=$!
    base=$(io_done "$D0")
    i=0
    while [ "$(io_done "$D0")" -lt $((base + 2000)) ] && [ $i -lt 300 ]; do
        usleep 100000; i=$((i + 1))
    done
    if [ "$(io_done "$D0")" -ge $((base + 2000)) ]; then
        pass "$r I/O in flight on lun0"
    else
        fail "$r I/O in flight on lun0"
    fi
    check "$r unbind virtio_scsi from $VDEV (device reset)" \
        sh -c "echo $VDEV > /sys/bus/virtio/drivers/virtio_scsi/unbind"
    # The in-flight job ends with errors once the disk is gone.
    wait $FIO_PID
    if [ ! -e "/sys/block/$D0" ]; then pass "$r lun0 gone after unbind"; else fail "$r lun0 gone after unbind"; fi
    check "$r rebind virtio_scsi to $VDEV" \
        sh -c "echo $VDEV > /sys/bus/virtio/drivers/virtio_scsi/bind"
    D0=$(wait_disk 0) && pass "$r lun0 attached again as $D0" || fail "$r lun0 attached again"
    D1=$(wait_disk 1) && pass "$r lun1 attached again as $D1" || fail "$r lun1 attached again"
    if [ -z "$D0" ] || [ -z "$D1" ]; then
        dmesg | tail -n 40 | sed 's/^/# dmesg: /'
        ls /sys/class/scsi_disk /sys/class/scsi_device 2>&1 | sed 's/^/# /'
    fi
    if [ -n "$D0" ]; then
        expect_eq "$r lun0 marker survives the reset" "$(read_marker "$D0")" "$(cat /tmp/marker.md5)"
        fio_verify "$r lun0 fresh fio write+verify after the reset" "$D0" 16M
    fi
    [ -n "$D1" ] && fio_verify "$r lun1 fresh fio write+verify after the reset" "$D1" 16M
    [ -n "$D0" ] && [ -n "$D1" ]
}

if [ -n "$D0" ]; then
    check "lun0 marker written" write_marker "$D0"
    echo "GUEST-MARKER: $(cat /tmp/marker.md5)"
    cycle=1
    while [ $cycle -le "${GUEST_RESETS:-1}" ] && reset_cycle $cycle; do
        cycle=$((cycle + 1))
    done
fi

echo "1..$N"
exit $((FAILED > 0))

#!/bin/sh
# Runs inside the guest as /test.sh (busybox sh) for the live migration
# test (tests/guest/migration-test.sh): keeps fio going while the host
# migrates the guest between QEMU processes GUEST_MIGRATIONS times, and
# prints one TAP line per check, named for its case (migration-basic, ...).
# The guest asks for each migration with a "GUEST-WANT: migrate K" console
# line once its load runs; the host answers through a mailbox, LUN 1 (a
# file it writes and the guest reads with O_DIRECT): "MIG K active" while
# migration K runs, "MIG K done" once it completed (written while the
# destination is still paused, so the guest never runs on the destination
# without knowing).
#
# LUN 0 (a file) and LUN 2 (a file the daemon opens with `direct`) get fio
# randwrite + crc32c verify jobs over 8 MiB regions of GUEST_FIO_SIZE, back
# to back through every migration, at GUEST_RATE_IOPS each (GUEST_LOAD=none:
# no load, for the benchmark).  During migration 2, after QEMU's first
# complete pass over RAM (the host holds the migration there until the
# guest says "GUEST-WANT: migrate 2 read"), the guest also reads all of
# GUEST_HEAVY_SIZE of LUN 3, which holds fio's crc32c pattern (written by
# the host), into its page cache and then verifies it from the cache: a
# data-in page the daemon filled but left unmarked in the dirty log
# arrives stale on the destination.  With
# GUEST_UNLOGGED=1, LUN 5 is the same on a second device whose daemon runs
# with the test hook that leaves data-in buffers unmarked: there the check
# must find stale pages, or it could not fail.
#
# SPDX-License-Identifier: GPL-2.0-or-later

N=0
FAILED=0
FIO_SIZE=${GUEST_FIO_SIZE:-32M}
HEAVY_SIZE=${GUEST_HEAVY_SIZE:-64M}
MIGRATIONS=${GUEST_MIGRATIONS:-5}
LOAD=${GUEST_LOAD:-write}
WAIT=${GUEST_WAIT:-180}
REGION=8 NREG=$(( ${FIO_SIZE%M} / 8 ))
# Each loop's I/O rate: a vCPU that never idles starves QEMU's migration
# thread of host CPU, and the migration of a TCG guest takes minutes.
RATE=${GUEST_RATE_IOPS:-300}

up() { cut -d' ' -f1 /proc/uptime; }
pass() { N=$((N + 1)); echo "ok $N - $* [$(up)s]"; }
fail() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $* [$(up)s]"; }
diag() { sed 's/^/# /' "$@"; }
done_tap() { echo "1..$N"; exit $((FAILED > 0)); }

# The disk of LUN $1 (on any of the virtio-scsi hosts: LUN numbers are
# distinct across them), waiting up to 30 s for it to attach.
wait_lun() {
    i=0
    while [ $i -lt 300 ]; do
        for d in /sys/class/scsi_disk/*:*:*:"$1"/device/block/*; do
            [ -b "/dev/${d##*/}" ] && { echo "${d##*/}"; return 0; }
        done
        usleep 100000
        i=$((i + 1))
    done
    return 1
}

# The mailbox's first line, "MIG K STATE", read past the page cache.
mbox() { dd if="/dev/$MB" bs=4096 count=1 iflag=direct 2>/dev/null | tr -d '\000' | head -n 1; }
# wait_mbox "K STATE": waits (bounded) until the host wrote that line.
wait_mbox() {
    i=0
    while [ "$(mbox)" != "MIG $1" ]; do
        i=$((i + 1))
        [ $i -lt $((WAIT * 10)) ] || return 1
        usleep 100000
    done
}

# Sectors completed on DEV so far.
io_done() { awk '{ print $1 + $5 }' "/sys/block/$1/stat"; }
# want_migration K: once LUN 0 made progress (the load runs), asks for K.
want_migration() {
    if [ "$LOAD" = write ]; then
        base=$(io_done "$D0") i=0
        while [ "$(io_done "$D0")" -lt $((base + 4096)) ] && [ $i -lt 600 ]; do
            usleep 100000; i=$((i + 1))
        done
    fi
    echo "GUEST-WANT: migrate $1"
}

# Verify errors fio reported in OUT (bad headers, checksum mismatches).
verify_errors() { grep -c 'verify: bad\|verify failed' "$1"; }

# write_loop DEV TAG: fio jobs on DEV until /tmp/stop, one 8 MiB region
# after the other; /tmp/jobs.TAG holds "jobs-done jobs-failed".
write_loop() {
    j=0 bad=0
    echo "0 0" >"/tmp/jobs.$2"
    while [ ! -e /tmp/stop ]; do
        r=$((j % NREG))
        fio --name="r$r" --filename="/dev/$1" --ioengine=libaio --direct=1 --iodepth=16 \
            --rw=randwrite --bs=4k --offset=$((r * REGION))M --size=${REGION}M --rate_iops="$RATE" \
            --verify=crc32c --verify_fatal=1 --do_verify=1 >"/tmp/job.$2" 2>&1
        if [ $? != 0 ] || [ "$(verify_errors "/tmp/job.$2")" != 0 ]; then
            bad=$((bad + 1)); cp "/tmp/job.$2" "/tmp/bad.$2"
        fi
        j=$((j + 1))
        echo "$j $bad" >"/tmp/jobs.$2.new" && mv "/tmp/jobs.$2.new" "/tmp/jobs.$2"
    done
}
jobs_of() { cut -d' ' -f1 "/tmp/jobs.$1"; }

# cache_check DEV: fio's crc32c verify of the pattern on DEV, read from the
# page cache (no invalidation, buffered); sets ERRS and RC.
cache_check() {
    fio --name=pattern --filename="/dev/$1" --rw=write --bs=64k --size="$HEAVY_SIZE" \
        --verify=crc32c --verify_only --invalidate=0 --direct=0 --ioengine=psync \
        --continue_on_error=verify >"/tmp/check.$1" 2>&1
    RC=$? ERRS=$(verify_errors "/tmp/check.$1")
}

echo "# guest: $(uname -r), $MIGRATIONS migrations, load $LOAD"
D0=$(wait_lun 0) && MB=$(wait_lun 1) && D2=$(wait_lun 2) && D3=$(wait_lun 3) ||
    { fail "migration: luns 0-3 attached"; done_tap; }
pass "migration: lun0 $D0, mailbox lun1 $MB, lun2 (direct) $D2, lun3 $D3 attached"
if [ "${GUEST_UNLOGGED:-0}" = 1 ]; then
    D5=$(wait_lun 5) && pass "migration: lun5 $D5 (daemon with the unlogged test hook) attached" ||
        { fail "migration: lun5 attached"; done_tap; }
fi

if [ "$LOAD" = write ]; then
    write_loop "$D0" lun0 &
    L0=$!
    write_loop "$D2" lun2 &
    L2=$!
fi

k=1
while [ $k -le "$MIGRATIONS" ]; do
    want_migration $k
    if [ $k = 2 ]; then
        # Heavy reads: the host says "2 active" once QEMU's first pass
        # over RAM is over and holds the migration there, so every page
        # these reads fill was already sent and only the dirty log can
        # send it again.  Fill the page cache from LUN 3 (and 5) with all
        # of HEAVY_SIZE, then tell the host, which lets the migration
        # complete; keep the cache: dropping it would drop the evidence.
        wait_mbox "2 active" || { fail "migration-heavy-read: the host reported migration 2 active"; break; }
        # Linux drops a block device's page cache when its last opener
        # closes it: hold both open until they have been checked.
        exec 7<"/dev/$D3" 8<"/dev/${D5:-$D3}"
        off=0 HELD=1
        while [ $off -lt "${HEAVY_SIZE%M}" ]; do
            for d in $D3 ${D5:-}; do
                dd if="/dev/$d" of=/dev/null bs=1M skip=$off count=4 2>/dev/null
            done
            off=$((off + 4))
        done
        FILLED=$off
        [ "$(mbox)" = "MIG 2 active" ] || HELD=0
        echo "GUEST-WANT: migrate 2 read"
    fi
    if ! wait_mbox "$k done"; then
        fail "migration-pingpong: the host reported migration $k done"
        break
    fi
    if [ "$LOAD" = write ]; then
        if kill -0 $L0 && kill -0 $L2; then
            pass "migration-pingpong: migration $k completed while fio ran (lun0 job $(($(jobs_of lun0) + 1)), lun2 job $(($(jobs_of lun2) + 1)))"
        else
            fail "migration-pingpong: migration $k completed while fio ran (a write loop ended)"
        fi
    else
        pass "migration-pingpong: migration $k completed"
    fi
    if [ $k = 2 ]; then
        if [ "$HELD" = 1 ]; then
            pass "migration-heavy-read: read $FILLED MiB of lun3${D5:+ and lun5} into the page cache after QEMU's first RAM pass, while the host held migration 2"
        else
            fail "migration-heavy-read: read lun3 while the host held migration 2 (it ended first)"
        fi
        cache_check "$D3"
        if [ "$RC" = 0 ] && [ "$ERRS" = 0 ]; then
            pass "migration-heavy-read: fio crc32c verify on the destination of what was read during the migration, from the page cache: clean"
        else
            fail "migration-heavy-read: fio crc32c verify from the page cache (fio status $RC, $ERRS verify errors)"
            head -n 20 "/tmp/check.$D3" | diag
        fi
        if [ -n "${D5:-}" ]; then
            cache_check "$D5"
            if [ "$ERRS" -gt 0 ]; then
                pass "migration-heavy-read-unlogged: the same check finds stale data-in pages when the daemon leaves them unmarked ($ERRS verify errors)"
            else
                fail "migration-heavy-read-unlogged: stale pages detected with data-in unmarked (none: the check cannot fail; fio status $RC)"
            fi
        fi
        exec 7<&- 8<&-
    fi
    k=$((k + 1))
done

if [ "$LOAD" = write ]; then
    touch /tmp/stop
    wait $L0 $L2
    for t in lun0:migration-basic lun2:migration-direct; do
        read jobs bad <"/tmp/jobs.${t%%:*}"
        if [ "$bad" = 0 ] && [ "$jobs" -gt 0 ]; then
            pass "${t#*:}: $jobs fio randwrite ${REGION}M + crc32c verify jobs on ${t%%:*} across the migrations, all clean"
        else
            fail "${t#*:}: fio jobs on ${t%%:*} across the migrations: $bad of $jobs failed"
            head -n 20 "/tmp/bad.${t%%:*}" | diag
        fi
        # The regions written, for the host's verify pass of the files.
        echo "GUEST-REGIONS: ${t%%:*} $((jobs < NREG ? jobs : NREG))"
    done
fi
done_tap

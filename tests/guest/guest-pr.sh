#!/bin/sh
# Runs inside the guest as /test.sh (busybox sh) of tests/guest/pr-guest-test.sh:
# one of two cluster nodes sharing LUN 0, fencing with sg_persist.  Each
# step waits for the other node's through what both can see, the LUN's
# reservation state (READ KEYS / READ RESERVATION), polled with a bound.
#   GUEST_ROLE=a: registers key a1, reserves Write Exclusive - Registrants
#     Only, writes, and says so by a REGISTER AND IGNORE of its own key (which
#     moves PRgeneration to 2 and nothing else); then waits to be fenced (its
#     key gone) and checks that its writes now fail (RESERVATION CONFLICT)
#     while its reads still work.
#   Every registration sets APTPL, so the state outlives the daemon.
#   GUEST_ROLE=b: waits for that; unregistered, its write fails;
#     registered (key b2), it writes and starts fio with verification, does
#     PREEMPT AND ABORT of a's key while fio runs, and checks it holds the
#     reservation and fio verified everything.
#   GUEST_ROLE=restarted: node a again, booted after the daemon restarted:
#     b's reservation is still there, a's write still conflicts.
# Prints one TAP line per check; the exit status is the number of failures.
#
# SPDX-License-Identifier: GPL-2.0-or-later

N=0
FAILED=0
ROLE=${GUEST_ROLE:-a}
KEY_A=0xa1 KEY_B=0xb2
# How long one node waits for the other's step (both boot under TCG).
WAIT_S=${GUEST_WAIT_S:-240}

up() { cut -d' ' -f1 /proc/uptime; }
pass() { N=$((N + 1)); echo "ok $N - $* [$(up)s]"; }
fail() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $* [$(up)s]"; }
diag() { sed 's/^/# /' "$@"; }

check() {  # check DESC COMMAND...: pass if it succeeds
    desc=$1; shift
    if "$@" >/tmp/check.out 2>&1; then pass "$desc"; else fail "$desc"; diag /tmp/check.out; fi
}
refused() {  # refused DESC COMMAND...: pass if it fails
    desc=$1; shift
    if "$@" >/tmp/check.out 2>&1; then fail "$desc (it succeeded)"; else pass "$desc"; fi
}
# conflicts DESC N: a write at block N fails as Linux reports RESERVATION
# CONFLICT to a program: EBADE, "Invalid exchange".
conflicts() {
    if write_block "$2" >/tmp/check.out 2>&1; then
        fail "$1 (it succeeded)"
    elif grep -q 'Invalid exchange' /tmp/check.out; then
        pass "$1"
    else
        fail "$1 (another error)"; grep -i error /tmp/check.out | head -n 3 | sed 's/^/# /'
    fi
}

# waits up to WAIT_S for COMMAND to succeed, polling every half second.
wait_for() {
    i=0
    while [ $i -lt $((WAIT_S * 2)) ]; do
        if "$@" >/dev/null 2>&1; then return 0; fi
        usleep 500000
        i=$((i + 1))
    done
    return 1
}

disk=""
i=0
while [ $i -lt 300 ] && [ -z "$disk" ]; do
    for d in /sys/class/scsi_disk/*:*:*:0; do
        [ -d "$d/device/block" ] && disk=/dev/$(ls "$d/device/block" | head -n 1)
    done
    [ -n "$disk" ] || usleep 100000
    i=$((i + 1))
done
if [ -z "$disk" ] || [ ! -b "$disk" ]; then
    fail "LUN 0 attached"
    exit 1
fi
pass "LUN 0 is $disk"

# One direct 4 KiB write / read at block N (fio: busybox's dd has no O_DIRECT).
io_block() {  # io_block write|read N
    fio --name=one --filename="$disk" --direct=1 --ioengine=psync --rw="$1" --bs=4k \
        --size=4k --offset=$(($2 * 4096)) --output-format=terse --terse-version=3 2>&1
}
write_block() { io_block write "$1"; }
read_block() { io_block read "$1"; }
# READ KEYS answered, and lists key $1 (or does not).  A command that meets
# a unit attention fails and leaves the next poll to see the keys.
keys_have() {
    sg_persist --in --read-keys "$disk" >/tmp/keys.out 2>&1 && grep -q "^ *$1\$" /tmp/keys.out
}
keys_lack() {
    sg_persist --in --read-keys "$disk" >/tmp/keys.out 2>&1 && ! grep -q "^ *$1\$" /tmp/keys.out
}
reserved_by() {
    sg_persist --in --read-reservation "$disk" >/tmp/res.out 2>&1 &&
    grep -q "Key=$1" /tmp/res.out && grep -qi 'registrants only' /tmp/res.out
}

# A's reservation, at the PRgeneration A leaves once it has written.
a_is_ready() { reserved_by $KEY_A && grep -q 'generation=0x2,' /tmp/res.out; }

case "$ROLE" in
a)
    check "REGISTER key $KEY_A (APTPL)" \
        sg_persist --out --register --param-aptpl --param-sark=$KEY_A "$disk"
    check "RESERVE Write Exclusive - Registrants Only" \
        sg_persist --out --reserve --param-rk=$KEY_A --prout-type=5 "$disk"
    check "READ RESERVATION shows ours" reserved_by $KEY_A
    check "the holder writes" write_block 10
    # PRgeneration 1 -> 2 with nothing else changed: B's signal to go on.
    check "REGISTER AND IGNORE EXISTING KEY (the same key): PRgeneration 2" \
        sg_persist --out --register-ignore --param-aptpl --param-sark=$KEY_A "$disk"
    if wait_for keys_lack $KEY_A; then
        pass "fenced: our key is gone (PREEMPT AND ABORT by the other node)"
    else
        fail "fenced within ${WAIT_S}s"
    fi
    conflicts "after the fence our write gets RESERVATION CONFLICT" 11
    check "reads still work (Write Exclusive)" read_block 11
    refused "nor can we take it back (our key is gone)" \
        sg_persist --out --preempt-abort --param-rk=$KEY_A --param-sark=$KEY_B \
        --prout-type=5 "$disk"
    ;;
b)
    if wait_for a_is_ready; then
        pass "the other node holds Write Exclusive - Registrants Only, and wrote"
    else
        fail "the other node reserved within ${WAIT_S}s"
    fi
    conflicts "unregistered, our write gets RESERVATION CONFLICT" 20
    check "REGISTER key $KEY_B (APTPL)" \
        sg_persist --out --register --param-aptpl --param-sark=$KEY_B "$disk"
    check "a registrant writes under Registrants Only" write_block 20
    # fio writes and verifies 16 MiB at 8 MiB throughout the fence.
    fio --name=verify --filename="$disk" --direct=1 --ioengine=libaio --iodepth=8 \
        --rw=randwrite --bs=4k --offset=8M --size=16M --verify=crc32c --verify_fatal=1 \
        --do_verify=1 --output-format=terse --terse-version=3 >/tmp/fio.out 2>&1 &
    fio_pid=$!
    check "PREEMPT AND ABORT of key $KEY_A while fio runs" \
        sg_persist --out --preempt-abort --param-rk=$KEY_B --param-sark=$KEY_A \
        --prout-type=5 "$disk"
    check "READ RESERVATION shows ours" reserved_by $KEY_B
    check "READ KEYS: only ours" keys_lack $KEY_A
    check "we write after the fence" write_block 21
    if wait "$fio_pid" && ! grep -qi 'verify.*bad\|crc32c.*wanted' /tmp/fio.out; then
        pass "fio wrote and verified 16 MiB through the fence"
    else
        fail "fio through the fence"
        diag /tmp/fio.out
    fi
    ;;
restarted)
    check "after the restart b still holds the reservation (APTPL)" reserved_by $KEY_B
    check "READ KEYS: only b's" keys_lack $KEY_A
    conflicts "our write still gets RESERVATION CONFLICT" 12
    check "reads work" read_block 12
    ;;
esac
exit "$FAILED"

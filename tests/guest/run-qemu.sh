#!/bin/bash
# Boots the Debian guest kernel with an initramfs from scripts/mkinitramfs.sh
# under TCG, with shareable memfd guest RAM (vhost-user needs it), optional
# vhost-user-scsi devices, a hard timeout, and the console captured to a log.
# The exit status is the guest's: the N of the `GUEST-EXIT: N` line /init
# prints, 124 on timeout, 125 if QEMU stopped without that line.
#
# Usage: tests/guest/run-qemu.sh --initrd CPIO --log FILE [options] [-- QEMU ARGS]
#   --initrd CPIO        initramfs (required)
#   --log FILE           console + QEMU stderr (required)
#   --timeout SECS       hard limit for the whole run (default 240)
#   --append "ARGS"      extra kernel command line (e.g. guest.x=1)
#   --vhost-user-scsi S  add `-device vhost-user-scsi-pci` on socket S
#                        (repeatable: each gets its own chardev)
#   --num-queues N       request queues of each vhost-user-scsi device (2)
#   --device-opts OPTS   more properties of each vhost-user-scsi device
#                        (e.g. packed=on)
#   --chardev-opts OPTS  more options of each vhost-user-scsi device's
#                        socket chardev (e.g. reconnect-ms=500)
#   --kernel FILE        guest kernel (default: newest /boot/vmlinuz-*)
#   --mem SIZE           guest RAM (1G); --smp N  vCPUs (2)
#   --console            also copy the console to stdout while it runs
#   --qemu BIN           QEMU binary (default: $QEMU or qemu-system-x86_64;
#                        $QEMU_DATADIR, if set, is passed as -L)
#   --grace SECS         time allowed from GUEST-EXIT to power-off (20)
#   --qmp PATH           a QMP monitor on unix socket PATH (tests/guest/qmp.py)
#   --incoming URI       wait for a migration on URI (tcp:127.0.0.1:PORT), as
#                        the destination of a QEMU started with the same
#                        options; its console log continues the source's
# Everything after `--` is passed to QEMU unchanged (e.g. a virtio-scsi-pci
# with scsi-hd disks to compare against QEMU's own device model).
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -euo pipefail

usage() { sed -n '/^# Usage:/,/^# SPDX/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

INITRD="" LOG="" QMP="" INCOMING="" DEVOPTS="" CHAROPTS="" TIMEOUT=240 GRACE=20 APPEND="" KERNEL="" MEM=1G SMP=2 NUMQ=2 CONSOLE=0
QEMU_BIN=${QEMU:-qemu-system-x86_64}
SOCKS=()
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
    --initrd) INITRD=$2; shift 2 ;;
    --log) LOG=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --append) APPEND="$APPEND $2"; shift 2 ;;
    --vhost-user-scsi) SOCKS+=("$2"); shift 2 ;;
    --num-queues) NUMQ=$2; shift 2 ;;
    --device-opts) DEVOPTS=",$2"; shift 2 ;;
    --chardev-opts) CHAROPTS=",$2"; shift 2 ;;
    --kernel) KERNEL=$2; shift 2 ;;
    --mem) MEM=$2; shift 2 ;;
    --smp) SMP=$2; shift 2 ;;
    --console) CONSOLE=1; shift ;;
    --qemu) QEMU_BIN=$2; shift 2 ;;
    --grace) GRACE=$2; shift 2 ;;
    --qmp) QMP=$2; shift 2 ;;
    --incoming) INCOMING=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "run-qemu: unknown option $1" >&2; usage ;;
    esac
done
[ -n "$INITRD" ] && [ -n "$LOG" ] || usage
[ -r "$INITRD" ] || { echo "run-qemu: initrd $INITRD not readable" >&2; exit 2; }
if [ -z "$KERNEL" ]; then
    KERNEL=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$KERNEL" ] || { echo "run-qemu: no /boot/vmlinuz-*" >&2; exit 2; }
fi

args=(-machine q35,memory-backend=mem -accel tcg -cpu max -m "$MEM" -smp "$SMP"
      -object "memory-backend-memfd,id=mem,size=$MEM,share=on"
      -nographic -no-reboot -nic none
      -kernel "$KERNEL" -initrd "$INITRD"
      -append "console=ttyS0 quiet panic=-1$APPEND")
i=0
for s in ${SOCKS[@]+"${SOCKS[@]}"}; do
    args+=(-chardev "socket,id=vus$i,path=$s$CHAROPTS"
           -device "vhost-user-scsi-pci,id=vscsi$i,chardev=vus$i,num_queues=$NUMQ$DEVOPTS")
    i=$((i + 1))
done
[ -z "$QMP" ] || args+=(-qmp "unix:$QMP,server=on,wait=off")
[ -z "$INCOMING" ] || args+=(-incoming "$INCOMING")
args+=(${EXTRA[@]+"${EXTRA[@]}"})
# A QEMU unpacked outside /usr (scripts/qemu-7.2.sh --env) names its firmware dir.
[ -z "${QEMU_DATADIR:-}" ] || args=(-L "$QEMU_DATADIR" "${args[@]}")

mkdir -p "$(dirname "$LOG")"
echo "+ $QEMU_BIN ${args[*]}" >"$LOG"
timeout -k 5 "$TIMEOUT" "$QEMU_BIN" "${args[@]}" </dev/null >>"$LOG" 2>&1 &
qpid=$!
if [ "$CONSOLE" = 1 ]; then
    tail -n +2 -f --pid="$qpid" "$LOG" &
fi
# Wait until the guest reports its status (or QEMU ends).  A guest that then
# fails to power off (e.g. a hung device on shutdown) is not waited for
# beyond a grace period: the status it printed is what counts.
grep -a -q -m1 '^GUEST-EXIT: ' < <(tail -n +1 -f --pid="$qpid" "$LOG") || true
if ! timeout "$GRACE" tail -f --pid="$qpid" /dev/null; then
    echo "run-qemu: guest did not power off ${GRACE}s after GUEST-EXIT; killing QEMU" |
        tee -a "$LOG" >&2
    kill "$qpid" 2>/dev/null || true
fi
rc=0
wait "$qpid" || rc=$?

# The serial console ends lines with CR LF.
exit_line=$(tr -d '\r' <"$LOG" | grep -a -m1 '^GUEST-EXIT: [0-9]*$' || true)
if [ -n "$exit_line" ]; then
    exit "${exit_line#GUEST-EXIT: }"
fi
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "run-qemu: guest timed out after ${TIMEOUT}s (log: $LOG)" >&2
    exit 124
fi
echo "run-qemu: QEMU exited ($rc) without GUEST-EXIT (log: $LOG)" >&2
exit 125

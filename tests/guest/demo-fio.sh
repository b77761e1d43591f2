#!/bin/sh
# Runs inside the demo guest as /test.sh (busybox sh): the same fio jobs on
# each disk under comparison, one `DEMO-RESULT:` line per job and round for
# scripts/demo.sh to tabulate.  The disks are told apart by the PCI address
# of their virtio-scsi controller: GUEST_DEVS="label@0000:00:04.0,..." (commas:
# it comes from the kernel command line, where a space ends the value).
# GUEST_ROUNDS rounds (default 3) run every timed job on every disk, the
# disks' order reversed every round, so that the speed of this machine,
# which drifts by minutes, falls on both alike; demo.sh prints medians.
# Each timed result also counts the interrupts of the disk's request
# queues (/proc/interrupts, its virtio device's "request" vectors): under
# TCG there is no irqfd and every one is a trip through QEMU's main loop.
# GUEST_RUNTIME is the seconds of each timed job, GUEST_VERIFY_SIZE the size
# of the write+verify job (sized: fio 3.33 never verifies time_based jobs),
# run once per disk after the rounds.
#
# SPDX-License-Identifier: GPL-2.0-or-later

RUNTIME=${GUEST_RUNTIME:-15}
VSIZE=${GUEST_VERIFY_SIZE:-64M}
ROUNDS=${GUEST_ROUNDS:-3}
FAILED=0

# Prints the first disk whose sysfs path runs through PCI function $1.
disk_on_pci() {
    for b in /sys/block/sd*; do
        [ -e "$b" ] || continue
        case "$(readlink -f "$b/device")" in */"$1"/*) echo "${b##*/}"; return 0 ;; esac
    done
    return 1
}

wait_disk_on_pci() {
    i=0
    while [ $i -lt 300 ]; do
        disk_on_pci "$1" && return 0
        usleep 100000; i=$((i + 1))
    done
    return 1
}

# Terse v3 fields (fio 3.33): read bw KiB/s 7, IOPS 8, clat p99 30, lat mean
# 40 (us); write bw 48, IOPS 49, clat p99 71, lat mean 81.
# I/Os counted from the KiB moved (fields 6 and 47), at 4 KiB each.
report() {  # report LABEL JOB DIR TERSE_FILE ROUND IRQS
    awk -F';' -v label="$1" -v job="$2" -v dir="$3" -v round="$5" -v irqs="$6" '
        $1 == "3" {
            if (dir == "read") { kib = $6; bw = $7; iops = $8; p99 = $30; lat = $40 }
            else { kib = $47; bw = $48; iops = $49; p99 = $71; lat = $81 }
            sub(/.*=/, "", p99)
            printf "DEMO-RESULT: dev=%s job=%s round=%s err=%s iops=%d bw_kib=%d lat_us=%.0f p99_us=%s ios=%d irqs=%d\n",
                label, job, round, $5, iops, bw, lat, p99, kib / 4, irqs
        }' "$4"
}

# Interrupts so far on the request queues of the virtio device at PCI $1.
request_irqs() {
    vdev=$(basename "$(ls -d /sys/bus/pci/devices/"$1"/virtio* 2>/dev/null | head -n 1)")
    awk -v name="$vdev-request" '
        index($0, name) {
            for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i
        }
        END { print s + 0 }' /proc/interrupts
}

run_job() {  # run_job LABEL DEV PCI ROUND JOB DIR FIO-ARGS...
    label=$1 dev=$2 pci=$3 round=$4 job=$5 dir=$6; shift 6
    before=$(request_irqs "$pci")
    # The host reads the CPU time of the target and of QEMU's threads when
    # it sees these on the console: what each device costs the host per I/O.
    echo "DEMO-PHASE: begin dev=$label job=$job round=$round"
    if fio --name="$job" --filename="/dev/$dev" --direct=1 --ioengine=libaio \
           --bs=4k --output-format=terse --terse-version=3 "$@" >/tmp/fio.$$ 2>&1; then
        echo "DEMO-PHASE: end dev=$label job=$job round=$round"
        report "$label" "$job" "$dir" /tmp/fio.$$ "$round" $(($(request_irqs "$pci") - before))
    else
        FAILED=1
        echo "DEMO-PHASE: end dev=$label job=$job round=$round"
        echo "DEMO-RESULT: dev=$label job=$job round=$round err=fio-failed"
        sed 's/^/# /' /tmp/fio.$$
    fi
}

# The disks found: "label:dev:pci" words, in GUEST_DEVS order.
DISKS=
for spec in $(echo "$GUEST_DEVS" | tr , " "); do
    label=${spec%@*} pci=${spec#*@}
    if ! dev=$(wait_disk_on_pci "$pci"); then
        echo "DEMO-RESULT: dev=$label job=attach err=no-disk-on-$pci"
        FAILED=1
        continue
    fi
    echo "# $label: /dev/$dev on $pci, $(($(cat /sys/block/$dev/size) / 2048)) MiB"
    # How the guest's block layer set the disk up: a difference here is a
    # difference in guest CPU per I/O, which under TCG is what IOPS follow.
    q=/sys/block/$dev/queue
    echo "# $label queue: scheduler $(cat $q/scheduler) nr_requests $(cat $q/nr_requests)" \
        "hw_queues $(ls -d /sys/block/$dev/mq/* 2>/dev/null | wc -l)" \
        "max_sectors_kb $(cat $q/max_sectors_kb) rotational $(cat $q/rotational)" \
        "write_cache '$(cat $q/write_cache)' fua $(cat $q/fua 2>/dev/null || echo -)"
    DISKS="$DISKS $label:$dev:$pci"
done
REVERSED=
for d in $DISKS; do REVERSED="$d $REVERSED"; done

round=1
while [ $round -le "$ROUNDS" ]; do
    order=$DISKS
    [ $((round % 2)) = 0 ] && order=$REVERSED
    # busybox sh has no locals: run_job's variables are global, these are not its names.
    for rw in randwrite randread; do
        way=write
        [ $rw = randread ] && way=read
        for d in $order; do
            name=${d%%:*} rest=${d#*:}
            run_job "$name" "${rest%%:*}" "${rest#*:}" "$round" "$rw-4k-qd16" $way --rw=$rw \
                --iodepth=16 --time_based --runtime="$RUNTIME" --ramp_time=2
        done
    done
    round=$((round + 1))
done

for d in $DISKS; do
    label=${d%%:*} rest=${d#*:}
    dev=${rest%%:*}
    if fio --name=verify --filename="/dev/$dev" --direct=1 --ioengine=libaio \
           --bs=4k --iodepth=16 --rw=randwrite --size="$VSIZE" --verify=crc32c \
           --verify_fatal=1 --output-format=terse --terse-version=3 >/tmp/fio.$$ 2>&1; then
        echo "DEMO-RESULT: dev=$label job=verify-$VSIZE err=0 verify=pass"
    else
        FAILED=1
        echo "DEMO-RESULT: dev=$label job=verify-$VSIZE err=1 verify=FAIL"
        sed 's/^/# /' /tmp/fio.$$
    fi
done
exit $FAILED

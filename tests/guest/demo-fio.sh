#!/bin/sh
# Runs inside the demo guest as /test.sh (busybox sh): the same fio jobs on
# each disk under comparison, one `DEMO-RESULT:` line per job for
# scripts/demo.sh to tabulate.  The disks are told apart by the PCI address
# of their virtio-scsi controller: GUEST_DEVS="label@0000:00:04.0,..." (commas:
# it comes from the kernel command line, where a space ends the value).
# GUEST_RUNTIME is the seconds of each timed job, GUEST_VERIFY_SIZE the size
# of the write+verify job (sized: fio 3.33 never verifies time_based jobs).
#
# SPDX-License-Identifier: GPL-2.0-or-later

RUNTIME=${GUEST_RUNTIME:-15}
VSIZE=${GUEST_VERIFY_SIZE:-64M}
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
report() {  # report LABEL JOB DIR TERSE_FILE
    awk -F';' -v label="$1" -v job="$2" -v dir="$3" '
        $1 == "3" {
            if (dir == "read") { bw = $7; iops = $8; p99 = $30; lat = $40 }
            else { bw = $48; iops = $49; p99 = $71; lat = $81 }
            sub(/.*=/, "", p99)
            printf "DEMO-RESULT: dev=%s job=%s err=%s iops=%d bw_kib=%d lat_us=%.0f p99_us=%s\n",
                label, job, $5, iops, bw, lat, p99
        }' "$4"
}

run_job() {  # run_job LABEL DEV JOB DIR FIO-ARGS...
    label=$1 dev=$2 job=$3 dir=$4; shift 4
    if fio --name="$job" --filename="/dev/$dev" --direct=1 --ioengine=libaio \
           --bs=4k --output-format=terse --terse-version=3 "$@" >/tmp/fio.$$ 2>&1; then
        report "$label" "$job" "$dir" /tmp/fio.$$
    else
        FAILED=1
        echo "DEMO-RESULT: dev=$label job=$job err=fio-failed"
        sed 's/^/# /' /tmp/fio.$$
    fi
}

for spec in $(echo "$GUEST_DEVS" | tr , " "); do
    label=${spec%@*} pci=${spec#*@}
    if ! dev=$(wait_disk_on_pci "$pci"); then
        echo "DEMO-RESULT: dev=$label job=attach err=no-disk-on-$pci"
        FAILED=1
        continue
    fi
    echo "# $label: /dev/$dev on $pci, $(($(cat /sys/block/$dev/size) / 2048)) MiB"
    run_job "$label" "$dev" randwrite-4k-qd16 write --rw=randwrite --iodepth=16 \
        --time_based --runtime="$RUNTIME" --ramp_time=2
    run_job "$label" "$dev" randread-4k-qd16 read --rw=randread --iodepth=16 \
        --time_based --runtime="$RUNTIME" --ramp_time=2
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

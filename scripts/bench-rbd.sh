#!/bin/bash
# 4 KiB random read and write at QD32 on one RBD image: through
# vhost-scsi-target (vhost-scsi-bench, one queue, one I/O thread) and
# directly with fio's rbd engine, alternating, 3 rounds of 10 s each
# (docs/performance.md, "Ceph RBD").  The image rbd/perf (1 GiB) is made
# and filled first.  Usage: scripts/bench-rbd.sh CEPH_CONF [TOOLS_DIR]
# (e.g. after `tests/ceph/ceph-cluster.sh start /tmp/ceph1`).
set -u
C=${1:?usage: bench-rbd.sh CEPH_CONF [TOOLS_DIR]} B=${2:-build/tools}
T=$(mktemp -d /tmp/bench-rbd.XXXXXX)
trap 'rm -rf "$T"' EXIT
export CEPH_CONF=$C
rbd -c $C rm rbd/perf >/dev/null 2>&1
rbd -c $C create rbd/perf --size 1G
rbd -c $C bench --io-type write --io-size 4M --io-threads 4 --io-total 1G --io-pattern seq rbd/perf >/dev/null
fio_run() {  # MODE
    fio --name=rbd --ioengine=rbd --clientname=admin --pool=rbd --rbdname=perf --rw=$1 --bs=4k \
        --iodepth=32 --runtime=10 --time_based --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; k="read" if "read" in sys.argv[1] else "write"; d=j[k]; print("fio-rbd %s iops %.0f p99_us %.0f" % (sys.argv[1], d["iops"], d["clat_ns"]["percentile"]["99.000000"]/1000))' $1
}
tgt_run() {  # MODE
    rm -f $T/t.sock
    $B/vhost-scsi-target --socket-path $T/t.sock --lun "0=rbd:rbd/perf,conf=$C" --queues 1 --threads 1 >$T/t.log 2>&1 &
    local p=$!
    for _ in $(seq 100); do [ -S $T/t.sock ] && break; sleep 0.1; done
    $B/vhost-scsi-bench --socket $T/t.sock --rw $1 --bs 4k --iodepth 32 --time 10 --json -q |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("target  %s iops %.0f p99_us %.0f" % (sys.argv[1], j["iops"], j["lat_us"]["p99"]))' $1
    kill $p; wait $p
}
for mode in randread randwrite; do
    for r in 1 2 3; do
        echo "round $r load $(cut -d' ' -f1-3 /proc/loadavg)"
        fio_run $mode
        tgt_run $mode
    done
done

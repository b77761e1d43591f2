#!/bin/bash
# 4 KiB random read and write at QD32 on one RBD image: through
# vhost-scsi-target (vhost-scsi-bench, one queue, one I/O thread) and
# directly with fio's rbd engine, alternating, ROUNDS rounds (default 3) of
# 10 s each, in librbd's two cache modes, like with like
# (docs/performance.md, "Ceph RBD"):
#  - writeback: librbd's cache on (the default), taken out of its
#    write-through-until-flush mode by a first flush: fio's engine sends one
#    at open, the bench sends one with --flush-first;
#  - nocache: librbd's cache off: fio --direct=1 (its engine then sets
#    rbd_cache=false), the target with a copy of the configuration that says
#    `rbd cache = false` for clients.
# The image rbd/perf (1 GiB) is made and filled first.
# Usage: scripts/bench-rbd.sh CEPH_CONF [TOOLS_DIR]
# (e.g. after `tests/ceph/ceph-cluster.sh start /tmp/ceph1`).
set -u
C=${1:?usage: bench-rbd.sh CEPH_CONF [TOOLS_DIR]} B=${2:-build/tools} ROUNDS=${ROUNDS:-3}
T=$(mktemp -d /tmp/bench-rbd.XXXXXX)
trap 'rm -rf "$T"' EXIT
export CEPH_CONF=$C
cp "$C" $T/nocache.conf && printf '[client]\nrbd cache = false\n' >>$T/nocache.conf
rbd -c $C rm rbd/perf >/dev/null 2>&1
rbd -c $C create rbd/perf --size 1G
rbd -c $C bench --io-type write --io-size 4M --io-threads 4 --io-total 1G --io-pattern seq rbd/perf >/dev/null
fio_run() {  # CACHE MODE
    local direct=0
    [ $1 = nocache ] && direct=1
    fio --name=rbd --ioengine=rbd --clientname=admin --pool=rbd --rbdname=perf --rw=$2 --bs=4k \
        --iodepth=32 --direct=$direct --runtime=10 --time_based --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; k="read" if "read" in sys.argv[2] else "write"; d=j[k]; print("fio-rbd %s %s iops %.0f p99_us %.0f" % (sys.argv[1], sys.argv[2], d["iops"], d["clat_ns"]["percentile"]["99.000000"]/1000))' $1 $2
}
tgt_run() {  # CACHE MODE
    local conf=$C flush=--flush-first
    [ $1 = nocache ] && conf=$T/nocache.conf flush=
    rm -f $T/t.sock
    $B/vhost-scsi-target --socket-path $T/t.sock --lun "0=rbd:rbd/perf,conf=$conf" --queues 1 --threads 1 >$T/t.log 2>&1 &
    local p=$!
    for _ in $(seq 100); do [ -S $T/t.sock ] && break; sleep 0.1; done
    $B/vhost-scsi-bench --socket $T/t.sock --rw $2 --bs 4k --iodepth 32 --time 10 --json -q $flush |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("target  %s %s iops %.0f p99_us %.0f" % (sys.argv[1], sys.argv[2], j["iops"], j["lat_us"]["p99"]))' $1 $2
    kill $p; wait $p
}
for cache in writeback nocache; do
    for mode in randread randwrite; do
        for r in $(seq $ROUNDS); do
            echo "round $r load $(cut -d' ' -f1-3 /proc/loadavg)"
            fio_run $cache $mode
            tgt_run $cache $mode
        done
    done
done

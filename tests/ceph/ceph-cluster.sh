#!/bin/bash
# A throwaway single-host Ceph cluster from Debian's packages (ceph-mon,
# ceph-osd, ceph-common) for the RBD tests and for trying the rbd: backend
# by hand: one monitor and 1-3 OSDs on bluestore files, all on 127.0.0.1,
# everything (config, keyrings, data, logs, admin sockets) under one
# directory, no systemd, cephx on with generated keys.  A pool "rbd" with
# one replica per OSD (size = number of OSDs, min_size 1) is created and
# initialised for RBD.  No manager: nothing the tests do needs one.
#
#   ceph-cluster.sh start DIR [OSDS]
#       start a cluster in DIR (created; must be empty), wait until the
#       pool takes writes (bounded), print DIR/ceph.conf
#   ceph-cluster.sh stop DIR
#       kill every daemon of DIR's cluster (the data stays in DIR)
#   ceph-cluster.sh osd-stop DIR N / osd-start DIR N
#       stop (SIGKILL) / restart OSD N of that cluster
#   ceph-cluster.sh mon-stop DIR / mon-start DIR
#       stop (SIGKILL) / restart the monitor (same address and store); the
#       start returns once it answers, bounded
#   ceph-cluster.sh run DIR OSDS COMMAND...
#       start, run COMMAND with CEPH_CONF set, stop and remove DIR (trap)
#
# Client keyring: DIR/ceph.client.admin.keyring (named in ceph.conf, so
# `rbd -c DIR/ceph.conf ...` and librbd with conf=DIR/ceph.conf find it).
# Exit status 77 (and a line saying why) when the packages are missing.
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -euo pipefail

die() { echo "ceph-cluster.sh: $*" >&2; exit 1; }
# Every wait in here is bounded: a cluster that does not come up is an error.
START_TIMEOUT=${CEPH_START_TIMEOUT:-120}

need_packages() {
    local missing=()
    for b in ceph-mon ceph-osd ceph ceph-authtool monmaptool rbd; do
        command -v "$b" >/dev/null || missing+=("$b")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "ceph-cluster.sh: missing ${missing[*]} (apt-get install ceph-mon ceph-osd ceph-common)" >&2
        exit 77
    fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Runs the ceph CLI against DIR's cluster, bounded.
cephc() {
    local dir=$1; shift
    timeout 60 ceph -c "$dir/ceph.conf" --connect-timeout 30 "$@"
}

osd_start() {
    local dir=$1 n=$2
    ceph-osd -c "$dir/ceph.conf" -i "$n" -f >>"$dir/osd.$n.out" 2>&1 &
    echo $! >"$dir/osd.$n.pid"
}

# SIGKILLs the daemon whose pid PIDFILE holds and waits until it is gone.
kill_daemon() {
    local pidfile=$1 pid
    pid=$(cat "$pidfile" 2>/dev/null) || return 0
    kill -9 "$pid" 2>/dev/null || true
    # Bounded: a SIGKILLed process is gone within moments.
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    rm -f "$pidfile"
}

osd_stop() {
    kill_daemon "$1/osd.$2.pid"
}

mon_start() {
    local dir=$1
    ceph-mon -c "$dir/ceph.conf" -i a -f >>"$dir/mon.out" 2>&1 &
    echo $! >"$dir/mon.pid"
    cephc "$dir" mon stat >/dev/null || die "the monitor does not answer (see $dir/mon.a.log)"
}

mon_stop() {
    kill_daemon "$1/mon.pid"
}

start() {
    local dir=$1 osds=${2:-1} port fsid key
    need_packages
    [ "$osds" -ge 1 ] && [ "$osds" -le 3 ] || die "OSDS must be 1-3"
    mkdir -p "$dir"
    [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
    dir=$(cd "$dir" && pwd)
    port=$(free_port)
    fsid=$(cat /proc/sys/kernel/random/uuid)
    cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$port
public addr = 127.0.0.1
ms bind ipv4 = true
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $dir/ceph.\$name.keyring
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/\$name.log
pid file = $dir/run/\$name.pid
osd pool default size = $osds
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
mon osd down out interval = 0
# One host: the surviving OSD's report is enough to mark a killed one down,
# so the PGs peer on the survivor within the heartbeat grace.
mon osd min down reporters = 1
# A test machine is small: keep memory and threads down.
osd memory target = 939524096
bluestore cache size = 67108864
osd op num shards = 1
osd op num threads per shard = 2
[mon]
mon data = $dir/mon.\$id
[osd]
osd data = $dir/osd.\$id
osd objectstore = bluestore
bluestore block create = true
bluestore block size = 4294967296
bluestore fsck on mount = false
osd heartbeat grace = 5
EOF
    mkdir -p "$dir/run"
    ceph-authtool --create-keyring "$dir/ceph.mon.a.keyring" --gen-key -n mon. \
        --cap mon 'allow *' >/dev/null
    ceph-authtool --create-keyring "$dir/ceph.client.admin.keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
    ceph-authtool "$dir/ceph.mon.a.keyring" --import-keyring "$dir/ceph.client.admin.keyring" >/dev/null
    monmaptool --create --addv a "[v2:127.0.0.1:$port]" --fsid "$fsid" "$dir/monmap" >/dev/null
    ceph-mon -c "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" \
        --keyring "$dir/ceph.mon.a.keyring" >"$dir/mon.mkfs.out" 2>&1 ||
        { cat "$dir/mon.mkfs.out" >&2; die "ceph-mon --mkfs failed"; }
    cp "$dir/ceph.mon.a.keyring" "$dir/mon.a/keyring"
    mon_start "$dir"

    for n in $(seq 0 $((osds - 1))); do
        local uuid
        uuid=$(cat /proc/sys/kernel/random/uuid)
        mkdir -p "$dir/osd.$n"
        key=$(ceph-authtool --gen-print-key)
        ceph-authtool --create-keyring "$dir/ceph.osd.$n.keyring" -n "osd.$n" --add-key "$key" >/dev/null
        echo "{\"cephx_secret\": \"$key\"}" |
            cephc "$dir" osd new "$uuid" "$n" -i - >/dev/null
        ceph-osd -c "$dir/ceph.conf" -i "$n" --mkfs --osd-uuid "$uuid" >"$dir/osd.$n.mkfs.out" 2>&1 ||
            { cat "$dir/osd.$n.mkfs.out" >&2; die "ceph-osd --mkfs failed"; }
        osd_start "$dir" "$n"
    done
    cephc "$dir" osd pool create rbd 8 8 >/dev/null 2>&1
    cephc "$dir" osd pool set rbd size "$osds" --yes-i-really-mean-it >/dev/null 2>&1 ||
        cephc "$dir" osd pool set rbd size "$osds" >/dev/null
    cephc "$dir" osd pool set rbd min_size 1 >/dev/null 2>&1
    # The pool takes writes once its PGs have peered: bounded by START_TIMEOUT.
    timeout "$START_TIMEOUT" rbd -c "$dir/ceph.conf" pool init rbd ||
        die "pool rbd did not become writable within ${START_TIMEOUT}s (see $dir/*.log)"
    echo "$dir/ceph.conf"
}

stop() {
    local dir=$1 pid
    for f in "$dir"/osd.*.pid "$dir"/mon.pid; do
        [ -e "$f" ] || continue
        pid=$(cat "$f")
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$f"
    done
}

cmd=${1:-}
case "$cmd" in
start)
    [ $# -ge 2 ] || die "usage: ceph-cluster.sh start DIR [OSDS]"
    start "$2" "${3:-1}"
    ;;
stop)
    [ $# -eq 2 ] || die "usage: ceph-cluster.sh stop DIR"
    stop "$2"
    ;;
osd-stop)
    [ $# -eq 3 ] || die "usage: ceph-cluster.sh osd-stop DIR N"
    osd_stop "$2" "$3"
    ;;
osd-start)
    [ $# -eq 3 ] || die "usage: ceph-cluster.sh osd-start DIR N"
    osd_start "$2" "$3"
    ;;
mon-stop)
    [ $# -eq 2 ] || die "usage: ceph-cluster.sh mon-stop DIR"
    mon_stop "$2"
    ;;
mon-start)
    [ $# -eq 2 ] || die "usage: ceph-cluster.sh mon-start DIR"
    mon_start "$2"
    ;;
run)
    [ $# -ge 4 ] || die "usage: ceph-cluster.sh run DIR OSDS COMMAND..."
    dir=$2 osds=$3
    shift 3
    need_packages
    trap 'stop "$dir"; rm -rf "$dir"' EXIT
    CEPH_CONF=$(start "$dir" "$osds")
    export CEPH_CONF
    "$@"
    ;;
*)
    die "usage: ceph-cluster.sh start|stop|osd-stop|osd-start|mon-stop|mon-start|run ... (see the top of this file)"
    ;;
esac

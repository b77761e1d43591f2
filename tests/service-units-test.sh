#!/bin/bash
# The systemd units (systemd/): `systemd-analyze verify` accepts them (with
# ExecStart pointing at this build's daemon), and the daemon started the
# way the socket unit starts it — an inherited listening socket as fd 3
# (systemd-socket-activate), --config and --control as the service unit
# gives them — serves a front-end on that socket the LUNs of its config
# file.  Prints TAP; a missing systemd tool is a named skip.
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
N=0 FAILED=0
pass() { N=$((N + 1)); echo "ok $N - $*"; }
fail() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $*"; }
skip() { N=$((N + 1)); echo "ok $N - $1 # SKIP $2"; }
WORK=$(mktemp -d /tmp/service-units.XXXXXX)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

TARGET=$BUILD_DIR/tools/vhost-scsi-target
CTL=$BUILD_DIR/tools/vhost-scsi-ctl
BENCH=$BUILD_DIR/tools/vhost-scsi-bench

if command -v systemd-analyze >/dev/null; then
    mkdir -p "$WORK/units"
    cp "$SRC/systemd/vhost-scsi-target@.socket" "$WORK/units/"
    sed "s|@BINDIR@|$(cd "$BUILD_DIR/tools" && pwd)|" "$SRC/systemd/vhost-scsi-target@.service.in" \
        >"$WORK/units/vhost-scsi-target@.service"
    # An instance name for the templates; verify reads the files as they are.
    if (cd "$WORK/units" && cp vhost-scsi-target@.socket vhost-scsi-target@vm1.socket &&
        cp vhost-scsi-target@.service vhost-scsi-target@vm1.service &&
        systemd-analyze verify --man=no ./vhost-scsi-target@vm1.socket \
            ./vhost-scsi-target@vm1.service) >"$WORK/verify.log" 2>&1; then
        pass "systemd-analyze verify accepts the socket and service units"
    else
        fail "systemd-analyze verify accepts the socket and service units"
        sed 's/^/# /' "$WORK/verify.log"
    fi
else
    skip "systemd-analyze verify accepts the units" "systemd-analyze is not installed"
fi

if command -v systemd-socket-activate >/dev/null; then
    cat >"$WORK/vm1.json" <<JSON
{"version": 1, "backends": [{"name": "disk", "spec": "ram:16M"}],
 "controllers": [{"name": "default", "luns": [{"target": 0, "lun": 0, "backend": "disk"}]}]}
JSON
    # As the units run it: the socket is systemd's, passed as fd 3 on the first connection.
    systemd-socket-activate -l "$WORK/vm1.sock" -- "$TARGET" --fd 3 --config "$WORK/vm1.json" \
        --control "$WORK/vm1.ctl" >"$WORK/target.log" 2>&1 &
    PID=$!
    for i in $(seq 100); do [ -S "$WORK/vm1.sock" ] && break; sleep 0.05; done
    if out=$(timeout 60 "$BENCH" --socket "$WORK/vm1.sock" --ios 2000 --rw randread --bs 4k \
             --json -q 2>&1) && echo "$out" | grep -q '"reads":2000'; then
        pass "a front-end on the activated socket is served (2000 reads)"
    else
        fail "a front-end on the activated socket is served"; echo "$out" | sed 's/^/# /'
        sed 's/^/# target: /' "$WORK/target.log"
    fi
    if list=$("$CTL" target --control "$WORK/vm1.ctl" lun list 2>&1) &&
       echo "$list" | grep -q '^0:0 .*disk .*16\.0.MiB'; then
        pass "it serves the LUNs of its --config file: $list"
    else
        fail "it serves the LUNs of its --config file"; echo "$list" | sed 's/^/# /'
    fi
    kill -TERM "$PID"; wait "$PID"; rc=$?; PID=""
    if [ "$rc" = 0 ]; then pass "it exits with status 0 on SIGTERM"; else fail "it exits on SIGTERM (status $rc)"; fi
else
    skip "socket activation serves a front-end" "systemd-socket-activate is not installed"
fi
echo "1..$N"
[ "$FAILED" = 0 ]

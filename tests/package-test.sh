#!/bin/bash
# The Debian packages (debian/): a copy of the source tree is built with
# `dpkg-buildpackage -us -uc -b` as on a fresh Debian 12 machine, lintian
# finds no error or warning in them, and the .debs unpacked into a
# throwaway root (dpkg -x) hold the programs, the systemd templates (not
# enabled or started by the maintainer scripts), the man pages, the bash
# completion, the documentation and the example configuration (vhost-scsi),
# and the front-end library: libvhost-scsi-frontend.so.0 with its soname,
# exporting exactly the functions its header declares
# (libvhost-scsi-frontend0), the header, the .so link and the pkg-config
# file (libvhost-scsi-frontend-dev).  The installed programs run from
# there: vhost-scsi-target --print-capabilities, and a daemon with a RAM
# LUN that the installed vhost-scsi-bench writes and verifies, the
# installed vhost-scsi-ctl asks for its version, and a program built with
# `pkg-config vhost-scsi-frontend` against the root (tests/package/
# frontend-smoke.c: the header alone first) drives with TEST UNIT READY
# and INQUIRY; it is stopped by SIGTERM.  Prints TAP; a missing packaging
# tool is a named skip.
# Takes 2.5-4 minutes on 2 cores (a whole build; 225 s at load 12).
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
N=0 FAILED=0
pass() { N=$((N + 1)); echo "ok $N - $*"; }
fail() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $*"; }
skip() { N=$((N + 1)); echo "ok $N - $1 # SKIP $2"; }
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/package-test.XXXXXX")
PID=""
cleanup() { [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
VERSION=$(sed -n '1s/^vhost-scsi (\([^)]*\)).*/\1/p' "$SRC/debian/changelog")
ARCH=$(dpkg --print-architecture 2>/dev/null)
DEB=$WORK/vhost-scsi_${VERSION}_$ARCH.deb
LIBDEB=$WORK/libvhost-scsi-frontend0_${VERSION}_$ARCH.deb
DEVDEB=$WORK/libvhost-scsi-frontend-dev_${VERSION}_$ARCH.deb
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)
ROOT=$WORK/root

finish() { echo "1..$N"; [ "$FAILED" = 0 ]; exit; }

if ! command -v dpkg-buildpackage >/dev/null || ! command -v dh >/dev/null; then
    skip "dpkg-buildpackage -us -uc -b builds the package" \
        "dpkg-dev or debhelper is not installed (scripts/install-deps.sh)"
    finish
fi

# The tree as git knows it (tracked and new files, not the build directories).
mkdir -p "$WORK/vhost-scsi"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$SRC" && git ls-files -co --exclude-standard -z | tar --null --no-recursion -T - -cf -) |
        tar -xf - -C "$WORK/vhost-scsi"
else
    tar -C "$SRC" --exclude='./build*' --exclude=./obj-\* -cf - . | tar -xf - -C "$WORK/vhost-scsi"
fi
if (cd "$WORK/vhost-scsi" && DEB_BUILD_OPTIONS="parallel=2 ${DEB_BUILD_OPTIONS:-}" \
        dpkg-buildpackage -us -uc -b) >"$WORK/build.log" 2>&1 &&
        [ -f "$DEB" ] && [ -f "$LIBDEB" ] && [ -f "$DEVDEB" ]; then
    pass "dpkg-buildpackage -us -uc -b builds vhost-scsi, libvhost-scsi-frontend0 and -dev $VERSION"
else
    fail "dpkg-buildpackage -us -uc -b builds vhost-scsi, libvhost-scsi-frontend0 and -dev $VERSION"
    tail -40 "$WORK/build.log" | sed 's/^/# /'
    finish
fi

if command -v lintian >/dev/null; then
    if lintian --fail-on error,warning "$WORK/vhost-scsi_${VERSION}_$ARCH.changes" \
            >"$WORK/lintian.log" 2>&1; then
        pass "lintian finds no error or warning (default level)"
    else
        fail "lintian finds no error or warning (default level)"
        sed 's/^/# /' "$WORK/lintian.log"
    fi
else
    skip "lintian finds no error or warning" "lintian is not installed"
fi

fields_ok() {
    [ "$(dpkg-deb -f "$DEB" Package)" = vhost-scsi ] &&
        [ "$(dpkg-deb -f "$DEB" Version)" = "$VERSION" ] &&
        dpkg-deb -f "$DEB" Depends | grep -q 'libc6' &&
        dpkg-deb -f "$DEB" Depends | grep -q 'librbd1' &&
        dpkg-deb -f "$DEB" Depends | grep -q 'libiscsi'
}
check "the package is vhost-scsi $VERSION, depending on the libraries it links (libc6, librbd1, libiscsi)" \
    fields_ok

mkdir -p "$ROOT"
unpack() { dpkg -x "$DEB" "$ROOT" && dpkg -x "$LIBDEB" "$ROOT" && dpkg -x "$DEVDEB" "$ROOT"; }
check "dpkg -x unpacks the three into a throwaway root" unpack

LIB=$ROOT/usr/lib/$MA/libvhost-scsi-frontend.so.0
lib_ok() {
    local d=$ROOT/usr/lib/$MA
    [ "$(dpkg-deb -f "$LIBDEB" Package)" = libvhost-scsi-frontend0 ] || { echo "# package name"; return 1; }
    dpkg-deb -f "$LIBDEB" Depends | grep -q 'libglib2.0-0' || { echo "# lib Depends"; return 1; }
    dpkg-deb -f "$DEVDEB" Depends | grep -q "libvhost-scsi-frontend0 (= $VERSION)" ||
        { echo "# -dev Depends"; return 1; }
    [ -f "$d/libvhost-scsi-frontend.so.$VERSION" ] &&
        [ "$(readlink "$LIB")" = "libvhost-scsi-frontend.so.$VERSION" ] || { echo "# .so.0"; return 1; }
    readelf -d "$LIB" | grep -q 'Library soname: \[libvhost-scsi-frontend.so.0\]' ||
        { echo "# soname"; return 1; }
    [ "$(readlink "$d/libvhost-scsi-frontend.so")" = libvhost-scsi-frontend.so.0 ] &&
        [ -f "$ROOT/usr/include/vhost-scsi/vhost-frontend.h" ] &&
        [ -f "$d/pkgconfig/vhost-scsi-frontend.pc" ] || { echo "# -dev files"; return 1; }
    ! dpkg-deb -c "$DEB" | grep -q 'libvhost-scsi-frontend' || { echo "# in vhost-scsi too"; return 1; }
}
check "libvhost-scsi-frontend0 holds the library (soname .so.0, linked to glib), -dev the header, .so and .pc" \
    lib_ok

# What the library exports is what the header declares, and nothing else.
exports_ok() {
    local want got
    want=$(grep -oE '\bvfe_[a-z_0-9]+\(' "$ROOT/usr/include/vhost-scsi/vhost-frontend.h" |
           tr -d '(' | sort -u)
    got=$(nm -D --defined-only "$LIB" | awk '$2 == "T" {print $3}' | sort -u)
    [ "$got" = "$want" ] && [ "$(nm -D --defined-only "$LIB" | grep -vc ' T vfe_')" = 0 ] ||
        { diff <(echo "$want") <(echo "$got") | sed 's/^/# /'; return 1; }
}
check "the library exports exactly the functions vhost-frontend.h declares" exports_ok

# A program built against the root as a user would: pkg-config, the header first and alone.
export PKG_CONFIG_SYSROOT_DIR=$ROOT PKG_CONFIG_LIBDIR=$ROOT/usr/lib/$MA/pkgconfig
if flags=$(pkg-config --cflags --libs vhost-scsi-frontend) &&
        cc -std=gnu11 -Wall -Wextra -Werror -o "$WORK/frontend-smoke" \
            "$SRC/tests/package/frontend-smoke.c" $flags >"$WORK/cc.log" 2>&1; then
    pass "a program builds with pkg-config vhost-scsi-frontend against the root ($flags)"
else
    fail "a program builds with pkg-config vhost-scsi-frontend against the root"
    sed 's/^/# /' "$WORK/cc.log"
fi
unset PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_LIBDIR

bins_ok() {
    local b
    for b in vhost-scsi-target vhost-scsi-ctl vhost-scsi-bench; do
        [ -x "$ROOT/usr/bin/$b" ] || { echo "# no /usr/bin/$b"; return 1; }
    done
}
check "the three programs are in /usr/bin" bins_ok

units_ok() {
    local d=$ROOT/lib/systemd/system
    [ -f "$d/vhost-scsi-target@.socket" ] && [ -f "$d/vhost-scsi-target@.service" ] &&
        grep -q '^ExecStart=/usr/bin/vhost-scsi-target --fd 3 ' "$d/vhost-scsi-target@.service" &&
        grep -q '^Type=notify$' "$d/vhost-scsi-target@.service" &&
        grep -q '^NotifyAccess=main$' "$d/vhost-scsi-target@.service"
}
check "the systemd socket and service templates are installed, ExecStart=/usr/bin/vhost-scsi-target, Type=notify" \
    units_ok

# The admin enables an instance: no maintainer script enables or starts a unit.
not_enabled() {
    mkdir -p "$WORK/control"
    dpkg-deb -e "$DEB" "$WORK/control" || return 1
    ! cat "$WORK"/control/{preinst,postinst,prerm,postrm} 2>/dev/null |
        grep -E 'deb-systemd-helper (enable|.*was-enabled)|deb-systemd-invoke (start|restart)|systemctl (enable|start)'
}
check "the maintainer scripts neither enable nor start the units" not_enabled

man_ok() {
    local p
    for p in man8/vhost-scsi-target.8 man8/vhost-scsi-ctl.8 man1/vhost-scsi-bench.1; do
        [ -f "$ROOT/usr/share/man/$p.gz" ] || { echo "# no $p.gz"; return 1; }
        if command -v groff >/dev/null; then
            zcat "$ROOT/usr/share/man/$p.gz" | groff -man -Tutf8 -P-cbou 2>/dev/null | grep -q "^SYNOPSIS" ||
                { echo "# $p does not format"; return 1; }
        fi
    done
}
check "the man pages are installed (man8, man1) and format" man_ok

completion_ok() {
    local d=$ROOT/usr/share/bash-completion/completions
    [ -f "$d/vhost-scsi-target" ] &&
        [ "$(readlink "$d/vhost-scsi-ctl")" = vhost-scsi-target ] &&
        [ "$(readlink "$d/vhost-scsi-bench")" = vhost-scsi-target ] &&
        bash -c 'source "$1" && complete -p vhost-scsi-target vhost-scsi-ctl vhost-scsi-bench' \
            _ "$d/vhost-scsi-ctl" >/dev/null
}
check "the bash completion is installed under each program's name and registers all three" \
    completion_ok

docs_ok() {
    local d=$ROOT/usr/share/doc/vhost-scsi f
    for f in README.md rbd.md service.md control.md iscsi.md copyright changelog.gz \
            examples/vm1.json examples/README; do
        [ -f "$d/$f" ] || { echo "# no $d/$f"; return 1; }
    done
    # The units' Documentation= link is readable as it is.
    grep -q 'Documentation=file:///usr/share/doc/vhost-scsi/service.md' \
        "$ROOT/lib/systemd/system/vhost-scsi-target@.service"
}
check "the documentation (README, docs incl. rbd.md) and examples (vm1.json, README) are installed" \
    docs_ok

caps=$("$ROOT/usr/bin/vhost-scsi-target" --print-capabilities 2>&1)
if echo "$caps" | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin) != {"type": "scsi"})' \
        2>/dev/null; then
    pass "the installed vhost-scsi-target --print-capabilities prints {\"type\": \"scsi\"}"
else
    fail "the installed vhost-scsi-target --print-capabilities prints {\"type\": \"scsi\"}"
    echo "$caps" | sed 's/^/# /'
fi

# The test hooks are not in the product: no hold: backend whatever the
# environment says, and neither it nor fault injection in the binary.
hooks_absent() {
    local b=$ROOT/usr/bin/vhost-scsi-target out
    if out=$(VHOST_SCSI_TEST_BACKENDS=1 timeout 10 "$b" --socket-path "$WORK/hooks.sock" \
                 --lun "0=hold:1M,while=$WORK/gate" 2>&1); then
        echo "# it started with a hold: LUN"; return 1
    fi
    echo "$out" | grep -q 'unknown backend "hold:' ||
        { echo "$out" | sed 's/^/# target: /'; return 1; }
    ! grep -qaE 'VHOST_SCSI_TEST_(FAULT|BACKENDS)|log-skip-data-in|listen-hold|sandbox-refused-call|test backend: every request waits' \
        "$b" || { echo "# $b carries a test hook's strings"; return 1; }
}
check "the installed daemon has no test hooks: VHOST_SCSI_TEST_BACKENDS=1 --lun 0=hold:... is refused as an unknown backend, no hook's strings in the binary" \
    hooks_absent

# The quick smoke test, from the installed paths only.
"$ROOT/usr/bin/vhost-scsi-target" --socket-path "$WORK/t.sock" --lun 0=ram:64M \
    --control "$WORK/t.ctl" >"$WORK/target.log" 2>&1 &
PID=$!
for _ in $(seq 200); do [ -S "$WORK/t.sock" ] && [ -S "$WORK/t.ctl" ] && break; sleep 0.05; done
if [ -S "$WORK/t.sock" ]; then
    pass "the installed daemon listens with a RAM LUN"
else
    fail "the installed daemon listens with a RAM LUN"
    sed 's/^/# target: /' "$WORK/target.log"
fi
if out=$(timeout 60 "$ROOT/usr/bin/vhost-scsi-bench" --socket "$WORK/t.sock" --rw randwrite \
         --bs 4k --iodepth 8 --time 2 --verify -q --json 2>&1) &&
        echo "$out" | grep -q '"writes":[1-9]'; then
    pass "the installed vhost-scsi-bench --verify writes the LUN and reads it back"
else
    fail "the installed vhost-scsi-bench --verify writes the LUN and reads it back"
    echo "$out" | sed 's/^/# /'
fi
if out=$("$ROOT/usr/bin/vhost-scsi-ctl" target --control "$WORK/t.ctl" version 2>&1) &&
        echo "$out" | grep -q "vhost-scsi-target $VERSION "; then
    pass "the installed vhost-scsi-ctl asks the daemon its version: $VERSION, the package's"
else
    fail "the installed vhost-scsi-ctl asks the daemon its version: $VERSION, the package's"
    echo "$out" | sed 's/^/# /'
fi
if out=$(LD_LIBRARY_PATH=$ROOT/usr/lib/$MA timeout 60 "$WORK/frontend-smoke" "$WORK/t.sock" 2>&1) &&
        echo "$out" | grep -q "^libvhost-scsi-frontend $VERSION$" &&
        echo "$out" | grep -q 'TEST UNIT READY good, INQUIRY VHOSTSCS'; then
    pass "that program, on the installed library, drives the installed daemon (TEST UNIT READY, INQUIRY)"
else
    fail "that program, on the installed library, drives the installed daemon (TEST UNIT READY, INQUIRY)"
    echo "$out" | sed 's/^/# /'
fi
kill -TERM "$PID"
status=""
for _ in $(seq 600); do
    if ! kill -0 "$PID" 2>/dev/null; then wait "$PID"; status=$?; PID=""; break; fi
    sleep 0.05
done
if [ "$status" = 0 ] && [ ! -e "$WORK/t.sock" ]; then
    pass "SIGTERM stops it with status 0 and its socket removed"
else
    fail "SIGTERM stops it with status 0 and its socket removed (status '${status:-still running}')"
    sed 's/^/# target: /' "$WORK/target.log"
fi

finish

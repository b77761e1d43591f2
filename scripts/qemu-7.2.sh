#!/bin/bash
# Makes bookworm's own QEMU 7.2 available next to the installed QEMU (10.0
# from bookworm-backports) without touching the system: downloads the 7.2
# qemu-system-x86/-common/-data debs plus bookworm's seabios and ipxe-qemu
# with `apt-get download`, unpacks them with `dpkg -x` into a private root
# in a build directory (meson's tests pass theirs; by hand the default is
# build/qemu-7.2, or $BUILD_DIR/qemu-7.2) and prints the path of the binary
# to use.  QEMU's Debian build is relocatable: run from <root>/usr/bin it loads
# its modules (the TCG accelerator is one in 7.2) from <root>/usr/lib/... and
# its firmware from <root>/usr/share/{qemu,seabios} and <root>/usr/lib/ipxe,
# so it never picks up 10.0's files.  Libraries the system lacks are fetched
# the same way into the root; the printed path is then a wrapper that sets
# LD_LIBRARY_PATH.  Idempotent: a second run only checks and prints.
#
# Usage: scripts/qemu-7.2.sh [--dir DIR] [--datadir | --env | --run CMD [ARG...]]
#   (no option)  print the QEMU binary path
#   --datadir    print the firmware/data dir (for QEMU's -L)
#   --dir DIR    the private root (default ${BUILD_DIR:-build}/qemu-7.2)
#   --env        print `export QEMU=... QEMU_DATADIR=...` for the qtest suite
#                and tests/guest (eval "$(scripts/qemu-7.2.sh --env)")
#   --run CMD... for meson's tests (suites qtest-qemu72, guest-qemu72): fetch
#                (parallel tests wait for one another), then run CMD with
#                QEMU and QEMU_DATADIR set; a failed fetch fails that test
#                only.  So the fetch happens when such a test runs, never
#                while building.
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=${BUILD_DIR:-$SRC/build}/qemu-7.2
MODE=bin
while [ $# -gt 0 ]; do
    case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --datadir) MODE=datadir; shift ;;
    --env) MODE=env; shift ;;
    --run) MODE=run; shift; break ;;
    -h|--help) sed -n '/^# Usage:/,/^# SPDX/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "qemu-7.2.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [ "$MODE" = run ]; then
    [ $# -gt 0 ] || { echo "qemu-7.2.sh: --run needs a command" >&2; exit 2; }
    # Parallel tests share one root: the first fetches, the others wait.
    mkdir -p "$DIR"
    env=$(flock "$DIR/.lock" "$0" --dir "$DIR" --env) ||
        { echo "qemu-7.2.sh: QEMU 7.2 unavailable (fetch failed, above)" >&2; exit 1; }
    eval "$env"
    export QEMU QEMU_DATADIR
    exec "$@"
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
ROOT=$DIR/root
REAL=$ROOT/usr/bin/qemu-system-x86_64
WRAPPER=$DIR/qemu-system-x86_64
DATADIR=$ROOT/usr/share/qemu

log() { echo "qemu-7.2.sh: $*" >&2; }

# Newest version of PKG starting with PREFIX (default: any), from the plain
# bookworm suites (never bookworm-backports, which carries 10.0).
pick_version() {
    apt-cache madison "$1" | awk -F'|' -v pre="${2:-}" '
        { v = $2; gsub(/ /, "", v) }
        $3 ~ /backports/ { next }
        index(v, pre) == 1 { print v; exit }'
}

fetch() {   # fetch PKG=VERSION... into $DIR/debs and unpack into $ROOT
    mkdir -p "$DIR/debs" "$ROOT"
    local spec pkg ver deb
    for spec in "$@"; do
        pkg=${spec%%=*} ver=${spec#*=}
        deb() { ls "$DIR/debs/${pkg}_"*"${ver#*:}"_*.deb 2>/dev/null | head -n1; }
        if [ -z "$(deb)" ]; then
            (cd "$DIR/debs" && apt-get download -q "$spec" 2>&1 |
                 grep -v '^W: Download is performed unsandboxed' >&2 || true)
        fi
        deb=$(deb)
        [ -n "$deb" ] || { log "apt-get download $spec failed"; exit 1; }
        dpkg -x "$deb" "$ROOT"
        echo "$spec" >> "$DIR/packages.txt"
    done
}

missing_libs() { LD_LIBRARY_PATH=$(private_libpath) ldd "$REAL" 2>/dev/null | awk '/not found/ { print $1 }'; }
private_libpath() { echo "$ROOT/lib/x86_64-linux-gnu:$ROOT/usr/lib/x86_64-linux-gnu"; }

is_72() { "$1" --version 2>/dev/null | grep -q 'version 7\.2\.'; }

if ! [ -x "$WRAPPER" ] || ! is_72 "$WRAPPER"; then
    rm -rf "$ROOT" "$DIR/packages.txt" "$WRAPPER"
    if [ -z "$(pick_version qemu-system-x86 1:7.2)" ]; then
        log "no QEMU 7.2 in the apt lists; running apt-get update"
        apt-get update -qq >&2
    fi
    # qemu-system-data is arch:all and lacks the binNMU suffix (+bN) of the
    # arch-specific packages, so each gets its own newest 7.2 version.
    X86=$(pick_version qemu-system-x86 1:7.2)
    COMMON=$(pick_version qemu-system-common "$X86")   # = is a hard Depends
    DATA=$(pick_version qemu-system-data 1:7.2)
    SEABIOS=$(pick_version seabios)
    IPXE=$(pick_version ipxe-qemu)
    for v in X86 COMMON DATA SEABIOS IPXE; do
        [ -n "${!v}" ] || { log "no bookworm version found for $v"; exit 1; }
    done
    log "fetching qemu-system-x86=$X86 data=$DATA seabios=$SEABIOS ipxe-qemu=$IPXE"
    fetch "qemu-system-x86=$X86" "qemu-system-common=$COMMON" "qemu-system-data=$DATA" \
          "seabios=$SEABIOS" "ipxe-qemu=$IPXE"

    # Shared libraries the system lacks: fetch the Depends: that are not
    # installed (their sonames are not mapped to packages without apt-file).
    if [ -n "$(missing_libs)" ]; then
        deps=$(dpkg-deb -f "$DIR/debs/"qemu-system-x86_*.deb Depends | tr ',' '\n' |
               sed 's/(.*)//; s/|.*//; s/ //g' | grep -v '^qemu-system\|^seabios\|^ipxe' || true)
        extra=()
        for d in $deps; do
            dpkg-query -W -f '${Status}' "$d" 2>/dev/null | grep -q 'ok installed' ||
                extra+=("$d=$(pick_version "$d")")
        done
        [ ${#extra[@]} -eq 0 ] || fetch "${extra[@]}"
        if [ -n "$(missing_libs)" ]; then
            log "still missing after fetching ${extra[*]}: $(missing_libs | tr '\n' ' ')"
            exit 1
        fi
    fi

    # The wrapper only adds private libraries; exec keeps QEMU's pid (the
    # qtest suite kills and reaps it) and its relocation base (the real path).
    {
        echo '#!/bin/sh'
        echo "# QEMU 7.2 from bookworm, unpacked by scripts/qemu-7.2.sh"
        if [ -n "$(ls "$ROOT/lib/x86_64-linux-gnu" 2>/dev/null)$(ls "$ROOT/usr/lib/x86_64-linux-gnu" | grep -v '^qemu$' || true)" ]; then
            echo "LD_LIBRARY_PATH=$(private_libpath)\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
            echo 'export LD_LIBRARY_PATH'
        fi
        echo "exec '$REAL' \"\$@\""
    } > "$WRAPPER"
    chmod +x "$WRAPPER"
    is_72 "$WRAPPER" || { log "$WRAPPER does not run as QEMU 7.2:"; "$WRAPPER" --version >&2; exit 1; }
    log "$("$WRAPPER" --version | head -n1)"
fi

case "$MODE" in
bin) echo "$WRAPPER" ;;
datadir) echo "$DATADIR" ;;
env) printf 'export QEMU=%q QEMU_DATADIR=%q\n' "$WRAPPER" "$DATADIR" ;;
esac

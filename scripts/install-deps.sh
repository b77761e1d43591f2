#!/bin/bash
# Installs the Debian packages the build, or the build and the tests, need.
#   scripts/install-deps.sh build [--check]   what `make` needs: compiler,
#       meson, ninja, pkg-config, the -dev libraries, scdoc (man pages)
#   scripts/install-deps.sh [test] [--check]  those plus what the tests, the
#       demo and the bench run: QEMU, a kernel image and busybox for the
#       guests, fio, tgt, Ceph's monitor and OSD, clang's libFuzzer,
#       debhelper and lintian for the package suite (`make deps`)
# --check installs nothing: it names what is missing and exits 1 if
# anything is (how `make` tells a build without its packages to run
# `make deps`).  Installing needs root or sudo.
# QEMU 10.0 comes from bookworm-backports (the primary test peer); the
# backports suite is added with the same mirror URI as the machine's
# existing Debian source, and nothing newer than bookworm is ever mixed in.
set -euo pipefail

set_=test check=0
for a in "$@"; do
    case "$a" in
    build|test) set_=$a ;;
    --check) check=1 ;;
    *) echo "install-deps.sh: unknown argument $a (build, test, --check)" >&2; exit 2 ;;
    esac
done

BUILD_PKGS=(build-essential meson ninja-build pkg-config gcc python3
      libglib2.0-dev libjson-glib-dev liburing-dev libiscsi-dev libkmod-dev libseccomp-dev
      librbd-dev linux-libc-dev scdoc bash-completion systemd)
TEST_PKGS=(clang libclang-rt-14-dev
      linux-image-amd64 busybox-static fio sg3-utils tgt kmod cpio
      util-linux python3-rtslib-fb dmsetup e2fsprogs
      ceph-mon ceph-osd ceph-common
      groff-base debhelper dpkg-dev lintian)
PKGS=("${BUILD_PKGS[@]}")
[ "$set_" = build ] || PKGS+=("${TEST_PKGS[@]}")

need=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done

qemu_ok() {
    command -v qemu-system-x86_64 >/dev/null &&
        qemu-system-x86_64 --version | grep -Eq 'version (9|[1-9][0-9])\.'
}
# The tests want a QEMU; 9.0 or newer unless VHOST_SCSI_QEMU_72 asks for bookworm's.
qemu_needed=0
if [ "$set_" = test ] && ! qemu_ok &&
   ! { [ -n "${VHOST_SCSI_QEMU_72:-}" ] && command -v qemu-system-x86_64 >/dev/null; }; then
    qemu_needed=1
fi

if [ ${#need[@]} -eq 0 ] && [ $qemu_needed = 0 ]; then
    exit 0
fi
if [ $check = 1 ]; then
    missing="${need[*]}"
    [ $qemu_needed = 0 ] || missing="$missing qemu-system-x86"
    echo "missing $set_ packages: ${missing# }" >&2
    if [ "$set_" = build ]; then
        echo "run \`make deps\` (or scripts/install-deps.sh build) first" >&2
    else
        echo "run \`make deps\` first" >&2
    fi
    exit 1
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
if [ $qemu_needed = 1 ] && [ -z "${VHOST_SCSI_QEMU_72:-}" ]; then
    src=/etc/apt/sources.list.d/debian.sources
    bp=/etc/apt/sources.list.d/bookworm-backports.sources
    if [ ! -e "$bp" ]; then
        uri=""
        if [ -f "$src" ]; then
            uri=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ && $2 !~ /security/ {print $2; exit}' "$src")
        fi
        if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
            uri=$(awk '/^deb / && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list)
        fi
        uri=${uri:-http://deb.debian.org/debian}
        $SUDO tee "$bp" >/dev/null <<EOS
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
    fi
fi
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${PKGS[@]}"
if [ $qemu_needed = 1 ]; then
    if [ -z "${VHOST_SCSI_QEMU_72:-}" ]; then
        $SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86 ||
            $SUDO apt-get install -y -q --no-install-recommends qemu-system-x86
    else
        $SUDO apt-get install -y -q --no-install-recommends qemu-system-x86
    fi
fi

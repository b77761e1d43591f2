#!/bin/bash
# Installs every Debian package the build, the tests and the demo need.
# QEMU 10.0 comes from bookworm-backports (the primary test peer); the
# backports suite is added with the same mirror URI as the machine's
# existing Debian source, and nothing newer than bookworm is ever mixed in.
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

PKGS=(build-essential meson ninja-build pkg-config gcc clang libclang-rt-14-dev
      libglib2.0-dev libjson-glib-dev liburing-dev libiscsi-dev libkmod-dev libseccomp-dev
      linux-libc-dev
      linux-image-amd64 busybox-static fio sg3-utils tgt kmod cpio
      util-linux python3 python3-rtslib-fb systemd dmsetup e2fsprogs
      librbd-dev ceph-mon ceph-osd ceph-common
      scdoc groff-base bash-completion debhelper dpkg-dev lintian)

need=()
for p in "${PKGS[@]}" qemu-system-x86; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done

qemu_ok() {
    command -v qemu-system-x86_64 >/dev/null &&
        qemu-system-x86_64 --version | grep -Eq 'version (9|[1-9][0-9])\.'
}

if [ ${#need[@]} -eq 0 ] && { qemu_ok || [ -n "${VHOST_SCSI_QEMU_72:-}" ]; }; then
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
src=/etc/apt/sources.list.d/debian.sources
bp=/etc/apt/sources.list.d/bookworm-backports.sources
if [ -z "${VHOST_SCSI_QEMU_72:-}" ] && [ ! -e "$bp" ]; then
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
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${PKGS[@]}"
if [ -z "${VHOST_SCSI_QEMU_72:-}" ]; then
    $SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86 ||
        $SUDO apt-get install -y -q --no-install-recommends qemu-system-x86
else
    $SUDO apt-get install -y -q --no-install-recommends qemu-system-x86
fi

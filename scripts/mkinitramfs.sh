#!/bin/bash
# Builds the uncompressed cpio initramfs that every QEMU guest test boots with
# the Debian guest kernel: busybox-static, fio, sg3-utils, blkdiscard, the
# virtio-scsi modules (plus any extra ones, with their dependencies resolved by
# `modprobe --show-depends`), and an /init that mounts proc/sys/devtmpfs, loads
# the modules in order, runs /test.sh, prints `GUEST-EXIT: N` and powers off.
# The output is rebuilt only when a hash of every input changes, so tests that
# share an image pay for it once.
#
# Usage: scripts/mkinitramfs.sh --out FILE [options]
#   --out FILE           cpio archive to write (required)
#   --init-script FILE   copied to /test.sh; /init runs it with busybox sh and
#                        prints its exit status as `GUEST-EXIT: N` (no script:
#                        /init drops to a shell on the console)
#   --modules "m1 m2"    extra kernel modules, loaded after the default ones
#                        (virtio_pci virtio_scsi sd_mod sg), deps included
#   --bin PATH           extra binary (repeatable); its shared libraries are
#                        collected with ldd; it keeps its absolute path.
#                        busybox sh runs its applets before looking at PATH:
#                        call a binary that shares an applet's name (e.g.
#                        blkdiscard) by its absolute path
#   --file SRC:DST       extra file or directory (repeatable), copied to DST
#   --kver VERSION       guest kernel version (default: newest /boot/vmlinuz-*)
#   --no-default-modules do not load the virtio-scsi set
#   --force              rebuild even if the cached archive is up to date
#   --print-kernel       print the kernel image path for --kver and exit
#
# In the guest, `guest.NAME=VALUE` words on the kernel command line are
# exported to /test.sh as GUEST_NAME=VALUE (e.g. guest.lun0_sectors=1048576 ->
# GUEST_LUN0_SECTORS), so one image serves runs with different parameters.
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -euo pipefail

usage() { sed -n '/^# Usage:/,/^# SPDX/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
die() { echo "mkinitramfs: $*" >&2; exit 1; }

OUT=""
INIT_SCRIPT=""
MODULES=""
KVER=""
BINS=()
FILES=()
DEFAULT_MODULES="virtio_pci virtio_scsi sd_mod sg"
FORCE=0
PRINT_KERNEL=0

while [ $# -gt 0 ]; do
    case "$1" in
    --out) OUT=$2; shift 2 ;;
    --init-script) INIT_SCRIPT=$2; shift 2 ;;
    --modules) MODULES="$MODULES $2"; shift 2 ;;
    --bin) BINS+=("$2"); shift 2 ;;
    --file) FILES+=("$2"); shift 2 ;;
    --kver) KVER=$2; shift 2 ;;
    --no-default-modules) DEFAULT_MODULES=""; shift ;;
    --force) FORCE=1; shift ;;
    --print-kernel) PRINT_KERNEL=1; shift ;;
    -h|--help) usage ;;
    *) echo "mkinitramfs: unknown option $1" >&2; usage ;;
    esac
done

if [ -z "$KVER" ]; then
    # The host kernel is not the guest kernel (it has no modules at all), so
    # pick the installed guest kernel rather than `uname -r`.
    k=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$k" ] || die "no /boot/vmlinuz-* (apt-get install linux-image-amd64)"
    KVER=${k#/boot/vmlinuz-}
fi
KERNEL=/boot/vmlinuz-$KVER
[ -r "$KERNEL" ] || die "kernel $KERNEL not readable"
if [ "$PRINT_KERNEL" = 1 ]; then echo "$KERNEL"; exit 0; fi

[ -n "$OUT" ] || usage
[ -d "/lib/modules/$KVER" ] || die "no /lib/modules/$KVER"
[ -z "$INIT_SCRIPT" ] || [ -r "$INIT_SCRIPT" ] || die "init script $INIT_SCRIPT not readable"

BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] || die "busybox not found (apt-get install busybox-static)"
if ldd "$BUSYBOX" >/dev/null 2>&1; then
    die "$BUSYBOX is dynamically linked; install busybox-static"
fi

find_bin() {
    local p
    p=$(PATH=$PATH:/usr/sbin:/sbin command -v "$1" || true)
    [ -n "$p" ] || die "binary $1 not found"
    readlink -f "$p"
}

# Tools every guest test may use; missing ones are an installation error.
ALL_BINS=("$(find_bin fio)" "$(find_bin sg_inq)" "$(find_bin sg_vpd)"
          "$(find_bin sg_readcap)" "$(find_bin blkdiscard)")
for b in ${BINS[@]+"${BINS[@]}"}; do
    [ -f "$b" ] || b=$(find_bin "$b")
    ALL_BINS+=("$(readlink -f "$b")")
done

# Module load order: modprobe prints each module's dependency chain; keep the
# first occurrence so a module is loaded once, after everything it needs.
MOD_PATHS=()
declare -A seen_mod=()
for m in $DEFAULT_MODULES $MODULES; do
    deps=$(modprobe -S "$KVER" --show-depends "$m" 2>&1) ||
        die "module $m: $deps"
    while read -r kind path _; do
        [ "$kind" = insmod ] || continue   # "builtin X" needs no loading
        if [ -z "${seen_mod[$path]:-}" ]; then
            seen_mod[$path]=1
            MOD_PATHS+=("$path")
        fi
    done <<<"$deps"
done

# Shared libraries (and the dynamic loader) of every binary, by absolute path.
collect_libs() {
    ldd "$1" 2>/dev/null | awk '
        /=>/ && $3 ~ /^\// { print $3; next }
        $1 ~ /^\// { print $1 }'
}
declare -A seen_lib=()
LIBS=()
for b in "${ALL_BINS[@]}"; do
    while read -r l; do
        [ -n "$l" ] || continue
        if [ -z "${seen_lib[$l]:-}" ]; then seen_lib[$l]=1; LIBS+=("$l"); fi
    done < <(collect_libs "$b")
done

# Cache key: this script, the options, and identity (size+mtime) of every
# file that goes in.  Contents of the small user-supplied files are hashed.
hash_inputs() {
    sha256sum "$0"
    echo "kver=$KVER modules=$DEFAULT_MODULES $MODULES"
    [ -z "$INIT_SCRIPT" ] || sha256sum "$INIT_SCRIPT"
    for f in ${FILES[@]+"${FILES[@]}"}; do
        echo "file $f"
        find "${f%%:*}" -type f -print0 | sort -z | xargs -0 -r sha256sum
    done
    stat -L -c '%n %s %Y' "$BUSYBOX" "${ALL_BINS[@]}" "${LIBS[@]}" \
        ${MOD_PATHS[@]+"${MOD_PATHS[@]}"}
}
HASH=$(hash_inputs | sha256sum | cut -d' ' -f1)
STAMP="$OUT.inputs"
if [ "$FORCE" = 0 ] && [ -s "$OUT" ] && [ -f "$STAMP" ] &&
   [ "$(cat "$STAMP")" = "$HASH" ]; then
    echo "mkinitramfs: $OUT is up to date" >&2
    exit 0
fi

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/initramfs.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,mnt,etc,root}
cp "$BUSYBOX" "$STAGE/bin/busybox"
for applet in $("$BUSYBOX" --list); do
    [ -e "$STAGE/bin/$applet" ] || ln -s busybox "$STAGE/bin/$applet"
done

# Copy a host file to the same path in the image.  /lib etc. are real
# directories in the image even though the host has merged /usr.
put() {
    local src=$1 dst=${2:-$1}
    mkdir -p "$STAGE$(dirname "$dst")"
    cp -L "$src" "$STAGE$dst"
}
for b in "${ALL_BINS[@]}"; do
    put "$b"
    # Make the tool reachable from PATH too, as a copy: a build tree under
    # /tmp (CI clones there) is hidden by the tmpfs /init mounts on /tmp.
    base=$(basename "$b")
    [ -e "$STAGE/usr/bin/$base" ] || cp -L "$b" "$STAGE/usr/bin/$base"
done
for l in ${LIBS[@]+"${LIBS[@]}"}; do put "$l"; done

: >"$STAGE/etc/modules.order"
for m in ${MOD_PATHS[@]+"${MOD_PATHS[@]}"}; do
    case "$m" in
    *.ko) put "$m" ;;
    *.ko.xz) mkdir -p "$STAGE$(dirname "$m")"; xz -dc "$m" >"$STAGE${m%.xz}"; m=${m%.xz} ;;
    *.ko.zst) mkdir -p "$STAGE$(dirname "$m")"; zstd -qdc "$m" >"$STAGE${m%.zst}"; m=${m%.zst} ;;
    *) die "unsupported module file $m" ;;
    esac
    echo "$m" >>"$STAGE/etc/modules.order"
done
echo "$KVER" >"$STAGE/etc/kver"

for spec in ${FILES[@]+"${FILES[@]}"}; do
    src=${spec%%:*}; dst=${spec#*:}
    [ "$src" != "$spec" ] && [ -n "$dst" ] || die "--file needs SRC:DST, got $spec"
    [ -e "$src" ] || die "--file source $src missing"
    mkdir -p "$STAGE$(dirname "$dst")"
    cp -a "$src" "$STAGE$dst"
done

if [ -n "$INIT_SCRIPT" ]; then
    cp "$INIT_SCRIPT" "$STAGE/test.sh"
    chmod 755 "$STAGE/test.sh"
fi

cat >"$STAGE/init" <<'EOF'
#!/bin/sh
# Guest /init: set up the minimal environment, run /test.sh, report its exit
# status on the console and power off.
# The real tools (in /usr) win over the busybox applets of the same name.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# Binaries kept at their host path may live under /tmp (a build tree in a
# clone there): the tmpfs would hide them, so what the archive has in /tmp
# is carried over into it.
mv /tmp /.archive-tmp && mkdir /tmp
mount -t tmpfs tmpfs /tmp
cp -a /.archive-tmp/. /tmp/ && rm -rf /.archive-tmp
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
while read -r m; do
    # A module already built in or loaded is fine; anything else is reported.
    out=$(insmod "$m" 2>&1) || case "$out" in
        *"File exists"*) ;;
        *) echo "init: insmod $m: $out" ;;
    esac
done </etc/modules.order
for w in $(cat /proc/cmdline); do
    case "$w" in
    guest.*=*)
        k=${w%%=*}; k=${k#guest.}
        k=$(echo "$k" | tr 'a-z.-' 'A-Z__')
        export "GUEST_$k=${w#*=}" ;;
    esac
done
if [ -x /test.sh ]; then
    # Start on a fresh console line: the firmware leaves escape codes behind.
    echo
    /bin/sh /test.sh
    rc=$?
    sync
    echo "GUEST-EXIT: $rc"
else
    echo "init: no /test.sh, starting a shell"
    setsid cttyhack sh
fi
poweroff -f
EOF
chmod 755 "$STAGE/init"

mkdir -p "$(dirname "$OUT")"
tmp_out=$(mktemp "$OUT.XXXXXX")
(cd "$STAGE" && find . -print0 | LC_ALL=C sort -z |
    cpio --null -o -H newc --quiet) >"$tmp_out"
chmod 644 "$tmp_out"
mv "$tmp_out" "$OUT"
echo "$HASH" >"$STAMP"
echo "mkinitramfs: wrote $OUT ($(du -h "$OUT" | cut -f1), kernel $KERNEL)" >&2

# Shell code the host side of the guest tests (tests/guest/*-test.sh) and
# scripts/demo.sh share, sourced rather than run: the common options
# (--build-dir, --keep, --console, -h), TAP numbering (pass/fail/skip/note/
# finish), the work directory that is removed on exit unless kept, the kernel
# modules an initramfs needs for LIO, the initramfs build step, waiting for
# the target's socket, relaying a guest's TAP lines and its run's status.
# It sets SRC (the source tree), BUILD_DIR (from the environment, default
# build), KEEP=0, CONSOLE=() and the TAP counters; the sourcing script sets
# HERE.
#
# SPDX-License-Identifier: GPL-2.0-or-later

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-build}
KEEP=0 CONSOLE=()

# Prints the script's "# Usage:" comment block (up to the SPDX line).
usage() { sed -n '/^# Usage:/,/^# SPDX/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# guest_parse_args "$@": the options every guest test takes.  A script with
# more defines guest_extra_option, which looks at "$@" and sets SHIFTED to the
# number of words it used (leaving 0 for an option it does not know).
guest_parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
        --build-dir) BUILD_DIR=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --console) CONSOLE=(--console); shift ;;
        -h|--help) usage ;;
        *)
            SHIFTED=0
            if declare -F guest_extra_option >/dev/null; then guest_extra_option "$@"; fi
            if [ "$SHIFTED" = 0 ]; then echo "unknown option $1" >&2; usage; fi
            shift "$SHIFTED" ;;
        esac
    done
    case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$SRC/$BUILD_DIR ;; esac
}

N=0 FAILED=0
pass() { N=$((N + 1)); echo "ok $N - $*"; }
fail() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $*"; }
# skip NAME REASON: the summary of `make check` lists the reason.
skip() { N=$((N + 1)); echo "ok $N - $1 # SKIP ${2:?skip needs a reason}"; }
note() { echo "# $*"; }
finish() { echo "1..$N"; [ "$FAILED" = 0 ]; exit $?; }

# guest_check_packed_starts LOG MIN: one TAP line.  LOG is a `--verbose`
# target's; each queue start must follow its connection's last SET_FEATURES:
# packed where bit 34 (VIRTIO_F_RING_PACKED) was acked — Linux's driver on
# a packed=on device — and split where it was not (SeaBIOS probes the disks
# through split rings first); at least MIN starts must have been packed.
guest_check_packed_starts() {
    local verdict npacked nsplit nbad
    verdict=$(python3 - "$1" <<'PY'
import re, sys
feats, n, bad = {}, {"packed": 0, "split": 0}, 0
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r" (conn\d+): SET_FEATURES (0x[0-9a-f]+)", line)
    if m:
        feats[m[1]] = int(m[2], 16)
    m = re.search(r" (conn\d+) vq\d+: started \(\d+ entries, (\w+) ring", line)
    if m:
        want = "packed" if feats.get(m[1], 0) >> 34 & 1 else "split"
        if m[2] == want:
            n[want] += 1
        else:
            bad += 1
print(n["packed"], n["split"], bad)
PY
)
    read -r npacked nsplit nbad <<<"$verdict"
    if [ "$npacked" -ge "$2" ] && [ "$nbad" = 0 ]; then
        pass "target ran $npacked queue starts packed as negotiated ($nsplit split, the firmware's)"
    else
        fail "queue layouts follow SET_FEATURES: $npacked packed, $nsplit split, $nbad wrong"
    fi
}

# guest_work_dir NAME: WORK becomes a fresh directory, removed on exit unless
# KEEP=1.  A script with more to stop on exit defines guest_cleanup_extra.
guest_work_dir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    GUEST_MAIN_PID=$BASHPID
    trap guest_cleanup EXIT
}
guest_cleanup() {
    # Subshells must not tear down the work directory of the main script.
    [ "$BASHPID" = "$GUEST_MAIN_PID" ] || return 0
    if declare -F guest_cleanup_extra >/dev/null; then guest_cleanup_extra; fi
    if [ "$KEEP" = 1 ]; then echo "# work directory kept: $WORK"; else rm -rf "$WORK"; fi
}

# guest_module_files KVER MODULE...: appends to FILES the --file arguments
# for the modules and their dependencies at their usual paths, plus the index
# files libkmod resolves names with (vhost-scsi-ctl loads them itself).
guest_module_files() {
    local kver=$1 m kind path f
    local -A seen=()
    shift
    for m in "$@"; do
        while read -r kind path _; do
            [ "$kind" = insmod ] && [ -z "${seen[$path]:-}" ] || continue
            seen[$path]=1
            FILES+=(--file "$path:$path")
        done < <(modprobe -S "$kver" --show-depends "$m" 2>&1)
    done
    for f in /lib/modules/"$kver"/modules.*; do
        FILES+=(--file "$f:$f")
    done
}

# guest_initramfs OUT MKINITRAMFS-ARGS...: builds the initramfs (one TAP
# line); on failure shows the build log and finishes.
guest_initramfs() {
    local out=$1
    shift
    if "$SRC/scripts/mkinitramfs.sh" --out "$out" "$@" >"$WORK/mkinitramfs.log" 2>&1; then
        pass "initramfs ready ($out)"
    else
        fail "initramfs build"; sed 's/^/# /' "$WORK/mkinitramfs.log"; finish
    fi
}

# wait_for_socket SOCK PID: waits up to 10 s for the target (PID) to create
# its listening socket; QEMU must not start before that (it would fail to
# connect).  Succeeds when the socket is there and the target still runs.
wait_for_socket() {
    for _ in $(seq 100); do
        [ -S "$1" ] && break
        kill -0 "$2" 2>/dev/null || break
        sleep 0.1
    done
    [ -S "$1" ] && kill -0 "$2" 2>/dev/null
}

# relay_guest_tap LOG LABEL STRIP: re-emits the TAP lines a guest printed on
# its console LOG under our numbering as "LABEL: description", and its "# "
# comments as they are.  STRIP is the glob that ends the guest's own prefix
# after "ok"/"not ok": "*- " for "ok - desc", " * - " for "ok N - desc".
relay_guest_tap() {
    local line
    while IFS= read -r line; do
        case "$line" in
        "ok "*) pass "$2: ${line#ok$3}" ;;
        "not ok "*) fail "$2: ${line#not ok$3}" ;;
        "# "*) echo "$line" ;;
        esac
    done < <(tr -d '\r' <"$1")
}

# guest_run_status WHO RC LOG: one TAP line for run-qemu.sh's status RC of
# the guest WHO names, with the tail of its console LOG when it hung.
guest_run_status() {
    case "$2" in
    0) pass "$1 finished, all its checks passed" ;;
    124|125) fail "$1 did not finish (run-qemu status $2)"
             tr -d '\r' <"$3" | tail -n 30 | sed 's/^/# console: /' ;;
    *) fail "$1 reported failures (GUEST-EXIT: $2)" ;;
    esac
}

# relay_kernel_guest LOG RC: relays a kernel guest script's "ok - ..." lines,
# then one line for run-qemu.sh's status RC (with the console tail when the
# guest hung).
relay_kernel_guest() {
    relay_guest_tap "$1" guest "*- "
    case "$2" in
    0) pass "guest finished, all its checks passed" ;;
    124|125) fail "guest did not finish (run-qemu status $2)"
             tr -d '\r' <"$1" | tail -n 40 | sed 's/^/# console: /' ;;
    *) fail "guest reported $2 failures" ;;
    esac
}

# guest_wait_want WHAT LOG PID SECS: waits up to SECS for the guest's
# "GUEST-WANT: WHAT" line in the console LOG of QEMU process PID (no filter
# between tail and grep: a pipe's buffering would hold it back).
guest_wait_want() {
    timeout "$4" grep -q -m1 "GUEST-WANT: $1" <(tail -n +1 -f --pid="$3" "$2" 2>/dev/null)
}

# guest_kill_all PID...: SIGTERM to each process still running, reaped.
guest_kill_all() {
    local p
    for p in "$@"; do
        if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; fi
    done
}

# target_stop_checked PID LOG: SIGTERM to the target (SIGKILL if it is still
# running 10 s later) and two TAP lines: it exited with status 0, and its
# log has no sanitizer report.
target_stop_checked() {
    kill -TERM "$1"
    if ! timeout 10 tail -f --pid="$1" /dev/null; then
        note "target still running 10 s after SIGTERM; killing it"
        kill -KILL "$1" 2>/dev/null
    fi
    wait "$1"; trc=$?
    if [ "$trc" = 0 ]; then pass "target exits with status 0 on SIGTERM"
    else fail "target exits with status 0 on SIGTERM (status $trc)"; fi
    if grep -qi 'AddressSanitizer\|runtime error:' "$2"; then
        fail "target log free of sanitizer reports"
        grep -i -A20 'AddressSanitizer\|runtime error:' "$2" | sed 's/^/# target: /'
    else
        pass "target log free of sanitizer reports"
    fi
}

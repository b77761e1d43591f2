#!/bin/bash
# Builds the libFuzzer targets with clang (build-fuzz/) and runs each one.
#   scripts/fuzz.sh [SECONDS]    (default 600 per target; `make fuzz FUZZ_TIME=N`)
# New corpus entries go to out/fuzz/<target>/ (seeds stay in tests/fuzz/corpus);
# a crash leaves out/fuzz/crash-<target>-* and makes the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-${FUZZ_TIME:-600}}
if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang meson setup build-fuzz -Dfuzzing=true -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized >/dev/null
fi
targets="fuzz-vhost-user fuzz-virtqueue fuzz-virtio-scsi fuzz-virtio-scsi-ctrl fuzz-scsi-cdb
         fuzz-lio-targetcli"
ninja -C build-fuzz $(for t in $targets; do echo tests/fuzz/$t; done) >/dev/null
status=0
for t in $targets; do
    mkdir -p out/fuzz/$t
    len=4096
    # A targetcli saveconfig.json of a few LUNs is 10-15 KB.
    [ "$t" = fuzz-lio-targetcli ] && len=32768
    if build-fuzz/tests/fuzz/$t -max_total_time="$time" -max_len=$len \
            -artifact_prefix=out/fuzz/crash-$t- out/fuzz/$t tests/fuzz/corpus/$t \
            > out/fuzz/$t.log 2>&1; then
        echo "fuzz: $t ran ${time}s: $(grep -E '^#[0-9]+.*DONE' out/fuzz/$t.log | tail -1)"
    else
        echo "fuzz: $t FAILED, see out/fuzz/$t.log"; grep -E "ERROR|SUMMARY" out/fuzz/$t.log | head -5
        status=1
    fi
done
exit $status

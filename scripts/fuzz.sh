#!/bin/bash
# Long fuzzing (`make fuzz`): builds the libFuzzer targets with clang
# (build-fuzz/, ASan+UBSan) and runs each one in turn, FUZZ_TIME seconds per
# target (default 1800, so 30 min each and 4.5 h for all nine), from its
# committed corpus; then merges what it found back into tests/fuzz/corpus/.
#   scripts/fuzz.sh                          every target, FUZZ_TIME s each
#   FUZZ_TIME=600 FUZZ_TARGETS="fuzz-lun-spec fuzz-config" scripts/fuzz.sh
#   FUZZ_MINIMISE=1 scripts/fuzz.sh          also rewrite each committed corpus
#                                            as a minimal one (same coverage)
# The targets are the directories of tests/fuzz/corpus/ (one per target,
# as tests/fuzz/meson.build registers them).  New inputs go first to
# out/fuzz/<target>/; the merge (libFuzzer -merge=1) copies into the
# committed corpus only those that add coverage, so it stays small.  Each
# target's line says how many runs, its coverage and what was merged; a
# crash, leak, timeout or OOM leaves the reproducer in
# out/fuzz/crash-<target>-* (replay: build-fuzz/tests/fuzz/<target> FILE),
# keeps going with the next target, and makes the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-${FUZZ_TIME:-1800}}
targets=${FUZZ_TARGETS:-$(cd tests/fuzz/corpus && ls -d fuzz-*)}
if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang meson setup build-fuzz -Dfuzzing=true -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized -Dtest_hooks=true >/dev/null
fi
bash scripts/test-hooks.sh --on build-fuzz
ninja -C build-fuzz $(for t in $targets; do echo tests/fuzz/$t; done) >/dev/null
status=0
for t in $targets; do
    # A unit slower than 30 s is a hang (the machine is shared, so not less).
    # A targetcli saveconfig.json of a few LUNs is 10-15 KB.
    len=4096
    [ "$t" = fuzz-lio-targetcli ] && len=32768
    opts=(-max_len=$len -timeout=30 -rss_limit_mb=2048 -print_final_stats=1)
    bin=build-fuzz/tests/fuzz/$t corpus=tests/fuzz/corpus/$t new=out/fuzz/$t
    mkdir -p "$new"
    before=$(ls "$corpus" | wc -l)
    if ! "$bin" "${opts[@]}" -max_total_time="$time" -artifact_prefix="out/fuzz/crash-$t-" \
            "$new" "$corpus" > "out/fuzz/$t.log" 2>&1; then
        echo "fuzz: $t FAILED after $(grep -o 'stat::number_of_executed_units: *[0-9]*' \
            "out/fuzz/$t.log" | grep -o '[0-9]*$' || echo '?') runs; see out/fuzz/$t.log"
        grep -E "^==[0-9]+==ERROR|^SUMMARY|Test unit written to" "out/fuzz/$t.log" | head -5
        status=1
        continue
    fi
    if [ "${FUZZ_MINIMISE:-0}" = 1 ]; then
        rm -rf "out/fuzz/$t.min" && mkdir "out/fuzz/$t.min"
        "$bin" "${opts[@]}" -merge=1 "out/fuzz/$t.min" "$corpus" "$new" \
            > "out/fuzz/$t.merge.log" 2>&1
        rm -rf "$corpus" && mv "out/fuzz/$t.min" "$corpus"
    else
        "$bin" "${opts[@]}" -merge=1 "$corpus" "$new" > "out/fuzz/$t.merge.log" 2>&1
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "out/fuzz/$t.log" |
           grep -o '[0-9]*$' || true)
    cov=$(grep -oE 'DONE +cov: [0-9]+ ft: [0-9]+' "out/fuzz/$t.log" | tail -1 |
          sed 's/DONE *//' || true)
    merged=$(grep -oE '[0-9]+ new files with [0-9]+ new features added; [0-9]+ new coverage edges' \
             "out/fuzz/$t.merge.log" || echo 'merge: see out/fuzz/'"$t"'.merge.log')
    echo "fuzz: $t ran ${time}s: $runs runs, $cov, no crash; merged $merged;" \
         "corpus $before -> $(ls "$corpus" | wc -l) files"
done
exit $status

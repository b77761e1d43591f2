#!/bin/bash
# The whole test suite (`make check`): an optimised build and an
# AddressSanitizer+UBSan build; unit, protocol and qtest suites (the qtest
# suite against QEMU 10.0 and bookworm's 7.2, fetched into the build) run under
# the sanitizers, guest tests (QEMU booting Linux) and the sandbox test
# (suite release) with the optimised binaries, and the package suite (the
# Debian package built, checked by lintian and run from a throwaway root).
# Also builds (only) what a user builds, `meson setup -Dbuildtype=release`
# with the project's warnings as errors, under gcc and under clang.
# Ends with the line "N passed, N failed, N skipped", counting test cases
# (scripts/test-summary.py).
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh test
bash scripts/build.sh build release || exit 1
bash scripts/build.sh build-asan asan || exit 1
if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang meson setup build-fuzz -Dfuzzing=true -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized -Dtest_hooks=true >/dev/null || exit 1
fi
bash scripts/test-hooks.sh --on build-fuzz || exit 1
# Every fuzz target has its corpus directory (tests/fuzz/meson.build), so the
# list to build is read from there and a new target cannot be left out.
ninja -C build-fuzz $(for d in tests/fuzz/corpus/*/; do echo "tests/fuzz/$(basename "$d")"; done) ||
    exit 1

# A user's release build (no test hooks, warnings as errors), under each
# compiler, built only: the tests ran on the builds above.  A failure does
# not stop the suites; it is a failed case of the summary.
built=()
for cc in gcc clang; do
    dir=build-release-$cc
    start=$SECONDS
    { [ -f "$dir/build.ninja" ] ||
          { rm -rf "$dir" && CC=$cc meson setup "$dir" -Dbuildtype=release; }; } >"$dir.log" 2>&1 &&
        ninja -C "$dir" >>"$dir.log" 2>&1
    status=$?
    mkdir -p "$dir" && mv "$dir.log" "$dir/build.log"
    if [ "$status" -ne 0 ]; then
        tail -n 30 "$dir/build.log"
        echo "FAILED: release build under $cc (exit status $status, see $dir/build.log)"
    fi
    echo "release build under $cc: $((SECONDS - start)) s"
    built+=("--built=$dir:$status")
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export MALLOC_PERTURB_=0

rm -f build/meson-logs/testlog.json build-asan/meson-logs/testlog.json \
    build-fuzz/meson-logs/testlog.json
# libFuzzer, 10 s per target from the seed corpora (clang build).
meson test -C build-fuzz --no-rebuild --print-errorlogs --suite fuzz
meson test -C build-asan --no-rebuild --print-errorlogs \
    --suite unit --suite protocol --suite qtest --suite fuzz --suite iscsi --suite ceph --suite qtest-qemu72
meson test -C build --no-rebuild --print-errorlogs --suite release --suite guest --suite package --num-processes 1

# Counts test cases from the TAP in each testlog, lists every skip with its
# reason and every failure, and fails when an expected suite did not run.
python3 scripts/test-summary.py "${built[@]}" build-fuzz:fuzz \
    build-asan:unit,protocol,qtest,fuzz,iscsi,ceph,qtest-qemu72 build:release,guest,package

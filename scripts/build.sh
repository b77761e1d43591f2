#!/bin/bash
# Configures (once) and builds one build directory, for the tests: with
# the test hooks compiled in (-Dtest_hooks=true: fault injection, the hold:
# backend), which an installed build (meson's default, the Debian package)
# never has.
#   scripts/build.sh DIR [asan]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
kind=${2:-release}
if [ ! -f "$dir/build.ninja" ]; then
    if [ "$kind" = asan ]; then
        meson setup "$dir" -Db_sanitize=address,undefined -Db_lundef=false \
            -Dbuildtype=debug -Dtest_hooks=true >/dev/null
    else
        meson setup "$dir" -Dbuildtype=debugoptimized -Dtest_hooks=true >/dev/null
    fi
fi
bash scripts/test-hooks.sh --on "$dir"
ninja -C "$dir"

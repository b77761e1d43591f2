#!/bin/bash
# Configures (once) and builds one build directory.
#   scripts/build.sh DIR [asan]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
kind=${2:-release}
if [ ! -f "$dir/build.ninja" ]; then
    if [ "$kind" = asan ]; then
        meson setup "$dir" -Db_sanitize=address,undefined -Db_lundef=false \
            -Dbuildtype=debug >/dev/null
    else
        meson setup "$dir" -Dbuildtype=debugoptimized >/dev/null
    fi
fi
ninja -C "$dir"

#!/bin/bash
# The test hooks (-Dtest_hooks=true: fault injection, the hold: backend)
# of a configured build directory.
#   scripts/test-hooks.sh DIR        exits 0 if DIR's build has them, 1 if not
#   scripts/test-hooks.sh --on DIR   turns them on where they are off (a
#                                    directory set up before the option
#                                    existed, or by hand); one that has them
#                                    is left alone, so nothing is rebuilt
set -euo pipefail
on=0
if [ "$1" = --on ]; then
    on=1
    shift
fi
dir=$1
has=$(meson introspect --buildoptions "$dir" | python3 -c '
import json, sys
print(any(o["name"] == "test_hooks" and o["value"] is True for o in json.load(sys.stdin)))')
[ "$has" = True ] && exit 0
[ "$on" = 1 ] || exit 1
# --reconfigure, not `meson configure`: it also knows an option newer than the directory.
meson setup --reconfigure "$dir" -Dtest_hooks=true >/dev/null

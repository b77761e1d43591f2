#!/usr/bin/env python3
# The file-level half of the layer rule (docs/design.md, "Layers"): inside a
# layer's static library, calls between its source files run one way, so
# no two files call each other, directly or round a longer circle.  Reads
# each archive's members with nm(1): a member's undefined symbols that
# another member defines are its calls into that file.  Prints TAP, one
# case per archive; a failing case names the circle and a symbol per step.
# The linker's --no-undefined checks (hw/meson.build) keep layers apart;
# this keeps the files of one layer in order.
#
#   file-circles.py LIBRARY.a ...
#
# SPDX-License-Identifier: GPL-2.0-or-later
import collections
import os
import subprocess
import sys

DEFINED = set('TDBRV')


def calls_between_members(archive):
    """{member: {other member: a symbol it calls there}} from nm's listing."""
    out = subprocess.run(['nm', archive], capture_output=True, text=True, check=True).stdout
    defines, wants = {}, collections.defaultdict(set)
    member = None
    for line in out.splitlines():
        if line.endswith(':') and ' ' not in line:
            # meson names hw/FOLDER/FILE.c's object FOLDER_FILE.c.o
            member = line[:-1].rsplit('/', 1)[-1].removesuffix('.o').replace('_', '/', 1)
            continue
        parts = line.split()
        if len(parts) == 3 and parts[1] in DEFINED:
            defines[parts[2]] = member
        elif len(parts) == 2 and parts[0] == 'U':
            wants[member].add(parts[1])
    calls = collections.defaultdict(dict)
    for m, syms in wants.items():
        for s in sorted(syms):
            d = defines.get(s)
            if d is not None and d != m:
                calls[m].setdefault(d, s)
    return calls


def find_circle(calls):
    """A list of members [a, b, ..., a] going round a circle, or None."""
    state = {}   # 1: on the current path, 2: done

    def visit(m, path):
        state[m] = 1
        path.append(m)
        for d in sorted(calls.get(m, {})):
            if state.get(d) == 1:
                return path[path.index(d):] + [d]
            if d not in state:
                found = visit(d, path)
                if found:
                    return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(calls):
        if m not in state:
            found = visit(m, [])
            if found:
                return found
    return None


def main(archives):
    failed = 0
    for i, archive in enumerate(archives, 1):
        name = os.path.basename(archive)
        calls = calls_between_members(archive)
        circle = find_circle(calls)
        if circle is None:
            print(f'ok {i} {name}: its files call one way')
            continue
        failed += 1
        print(f'not ok {i} {name}: files call each other in a circle')
        for a, b in zip(circle, circle[1:]):
            print(f'# {a} -> {b} ({calls[a][b]})')
    print(f'1..{len(archives)}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

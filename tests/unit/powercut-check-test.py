#!/usr/bin/env python3
# Specification of tests/guest/powercut-check.py, the power-cut test's
# checker, on hand-made dm-log-writes logs and journals (no guest): a write
# guaranteed by a mark must be in the prefix, a torn sector or another
# block's data is a violation, a FUA write logged before an older cached
# write to the same block keeps its data, writes never guaranteed may be
# missing, SYNCHRONIZE CACHE covers what was acknowledged before it was
# submitted, and the lose-cache mutation finds what flushes protected.
# Prints TAP itself (Python 3 standard library only).
#
# SPDX-License-Identifier: GPL-2.0-or-later
import os
import struct
import subprocess
import sys
import tempfile
import traceback
import zlib

CHECKER = os.environ.get('POWERCUT_CHECK') or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', 'guest', 'powercut-check.py')
FLUSH, FUA, MARK = 1, 2, 8
NBLOCKS = 8


def block(b, gen, torn_sector=None):
    """A 4 KiB block of generation gen as powercut-load writes it."""
    out = b''
    for s in range(8):
        sec = struct.pack('<IIQQ', 0x54554350, s, b, gen) + bytes(512 - 28)
        sec += struct.pack('<I', zlib.crc32(sec))
        if s == torn_sector:
            sec = sec[:256] + bytes(256)
        out += sec
    return out


def log(entries):
    """entries: ('mark', text) | ('write', first_block, data, flags) | ('flush',)."""
    body = b''
    for e in entries:
        if e[0] == 'mark':
            text = e[1].encode()
            hdr = struct.pack('<QQQQ', 0, 0, MARK, len(text)) + text
            body += hdr + bytes(512 - len(hdr))
        elif e[0] == 'flush':
            body += struct.pack('<QQQQ', 0, 0, FLUSH, 0) + bytes(512 - 32)
        else:
            _, first, data, flags = e
            body += struct.pack('<QQQQ', first * 8, len(data) // 512, flags, 0) + bytes(480)
            body += data
    sup = struct.pack('<QQQI', 0x6A736677736872, 1, len(entries), 512)
    return sup + bytes(512 - len(sup)) + body


def run(journal, entries, *extra):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, 'log'), 'wb') as f:
            f.write(log(entries))
        with open(os.path.join(d, 'journal'), 'w') as f:
            f.write('P %d 4096 %d 1\nG\n%sEND\n' % (NBLOCKS, journal[0], journal[1]))
        p = subprocess.run([sys.executable, CHECKER, '--log', os.path.join(d, 'log'),
                            '--journal', os.path.join(d, 'journal'), *extra],
                           stdout=subprocess.PIPE, universal_newlines=True)
        return p.returncode, p.stdout


START = ('mark', 'pc-start')
# Write 1 (block 2, FUA) acknowledged as acknowledgement 0.
FUA_JOURNAL = (1, 'W 1 2 1 1\nA 1 0\n')
# Write 1 (block 3) acknowledged, SYNCHRONIZE CACHE 1 submitted and acknowledged.
SYNC_JOURNAL = (1, 'W 1 3 1 0\nA 1 0\nS 1\nY 1 1\n')


def case_fua_write_in_its_prefix():
    rc, out = run(FUA_JOURNAL, [START, ('write', 2, block(2, 1), FUA), ('mark', 'pc-0')])
    assert rc == 0 and 'CUTS 3 VIOLATIONS 0' in out, out


def case_fua_write_after_its_mark_is_a_violation():
    rc, out = run(FUA_JOURNAL, [START, ('mark', 'pc-0'), ('write', 2, block(2, 1), FUA)])
    assert rc == 1 and 'generation 1 was guaranteed' in out, out


def case_torn_sector_is_a_violation():
    rc, out = run((1, 'W 1 2 1 0\nA 1 0\n'),
                  [START, ('write', 2, block(2, 1, torn_sector=5), 0), ('flush',)])
    assert rc == 1 and 'block 2 sector 5 is torn' in out, out


def case_other_blocks_data_is_a_violation():
    rc, out = run((1, 'W 1 2 1 0\nA 1 0\n'), [START, ('write', 2, block(4, 1), 0), ('flush',)])
    assert rc == 1 and 'torn or foreign' in out, out


def case_sync_covers_writes_acknowledged_before_it():
    rc, out = run(SYNC_JOURNAL, [START, ('mark', 'pc-0'), ('write', 3, block(3, 1), 0),
                                 ('flush',), ('mark', 'pc-1')])
    assert rc == 0 and 'VIOLATIONS 0' in out, out
    rc, out = run(SYNC_JOURNAL, [START, ('mark', 'pc-0'), ('flush',), ('mark', 'pc-1'),
                                 ('write', 3, block(3, 1), 0), ('flush',)])
    assert rc == 1 and 'generation 1 was guaranteed' in out, out


def case_unguaranteed_write_may_be_missing_until_the_end():
    # Acknowledged without FUA, no sync: absent at every cut but the last.
    rc, out = run((1, 'W 1 3 1 0\nA 1 0\n'),
                  [START, ('mark', 'pc-0'), ('write', 3, block(3, 1), 0), ('flush',)])
    assert rc == 0, out
    # ...but the whole log must hold every last acknowledged version.
    rc, out = run((1, 'W 1 3 1 0\nA 1 0\n'), [START, ('mark', 'pc-0')])
    assert rc == 1 and 'end of log' in out, out


def case_older_cached_write_does_not_replace_a_newer_fua_write():
    # Write 1 (cached) then write 2 (FUA) to block 5; dm-log-writes logs 2
    # at completion and 1 only at the next flush.
    j = (1, 'W 1 5 1 0\nA 1 0\nW 2 5 1 1\nA 2 1\n')
    rc, out = run(j, [START, ('mark', 'pc-0'), ('write', 5, block(5, 2), FUA), ('mark', 'pc-1'),
                      ('write', 5, block(5, 1), 0), ('flush',)])
    assert rc == 0 and '8 sectors not replayed over newer data' in out, out


def case_wce_off_guarantees_every_acknowledged_write():
    j = (0, 'W 1 1 1 0\nA 1 0\n')
    rc, out = run(j, [START, ('mark', 'pc-0'), ('write', 1, block(1, 1), 0), ('flush',)])
    assert rc == 1 and 'generation 1 was guaranteed' in out, out


def case_lose_cache_mutation_finds_flush_protected_writes():
    entries = [START, ('mark', 'pc-0'), ('write', 3, block(3, 1), 0), ('flush',),
               ('mark', 'pc-1')]
    rc, out = run(SYNC_JOURNAL, entries, '--mutate', 'lose-cache')
    assert rc == 1 and 'generation 1 was guaranteed' in out, out


def case_unreadable_input_is_status_2():
    rc, out = run(FUA_JOURNAL, [('write', 2, block(2, 1), FUA)])
    assert rc == 2 and 'no pc-start mark' in out, out


def main():
    cases = [(n, f) for n, f in sorted(globals().items()) if n.startswith('case_')]
    failed = 0
    for i, (name, fn) in enumerate(cases, 1):
        try:
            fn()
            print('ok %d - %s' % (i, name[5:]))
        except Exception:
            failed += 1
            print('not ok %d - %s' % (i, name[5:]))
            for line in traceback.format_exc().splitlines():
                print('# ' + line)
    print('1..%d' % len(cases))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())

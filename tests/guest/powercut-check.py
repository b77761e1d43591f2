#!/usr/bin/env python3
"""The checker of the power-cut test (tests/guest/powercut-test.sh).

Reads a dm-log-writes log (the kernel's drivers/md/dm-log-writes.c format:
a super block, then per entry one sector-size header, a mark's text inline,
a write's data after it) and the journal tools powercut-load wrote in the
guest, replays the log onto the LUN's initial content (zeros) and, at every
cut point -- after each log entry from the "pc-start" mark on -- holds the
state to the write-ordering contract:

- durability: every write the prefix guarantees reads back at that version
  or a newer one of the same block.  A mark "pc-SEQ" follows the
  acknowledgement SEQ in the log; a write is guaranteed from its own mark if
  it was acknowledged with FUA or with the write cache off (WCE 0), and from
  the mark of a SYNCHRONIZE CACHE if it was acknowledged before that
  SYNCHRONIZE CACHE was submitted;
- integrity: every 512-byte sector (the LUN's logical block) of the LUN's
  blocks is its initial content (zeros) or one whole version written to it
  (magic, index, block number, generation and CRC-32 agree): never torn,
  never another block's data.  Sectors of one multi-block write may be of
  different versions (SCSI promises atomicity per logical block only); they
  are counted as torn writes, not violations.

dm-log-writes logs a FUA write and a flush when they complete, and any
other write only when a flush is submitted after it completed, just before
that flush: so every prefix of the log is a state a disk could be left in
by a power cut, a cut inside a flush's batch keeps part of the cached
writes, and the cut right before the batch keeps none of the writes since
the last flush.  Checking each prefix covers them all.

After the whole log (dm-log-writes adds the writes never flushed when the
device is removed) every block must hold its last acknowledged version.

--mutate lose-cache drops every logged write without FUA: a disk that
acknowledges flushes without writing its cache back.  The checker must then
find violations wherever the workload relied on SYNCHRONIZE CACHE.

Exit status: 0 no violation, 1 violations, 2 unreadable input.

Usage: powercut-check.py --log FILE [--log-offset BYTES] --journal FILE
       [--journal-offset BYTES] [--name NAME] [--mutate lose-cache]

SPDX-License-Identifier: GPL-2.0-or-later
"""

import argparse
import struct
import sys
import zlib

LOG_MAGIC = 0x6A736677736872
FLUSH, FUA, DISCARD, MARK = 1, 2, 4, 8
SECTOR = 512
PCUT_MAGIC = 0x54554350
MAX_REPORTED = 12


class BadInput(Exception):
    pass


class Journal:
    """What the workload submitted and saw acknowledged, in its order."""

    def __init__(self, text):
        self.nblocks = self.bs = self.wce = None
        self.extents = []
        self.writes = {}          # gen -> (first, n, fua)
        self.versions = {}        # block -> [gen, ...] in submission order
        self.guarantees = {}      # ack seq -> [gen, ...] guaranteed at its mark
        self.last_acked = {}      # block -> gen
        self.acks = self.syncs = 0
        pending = []              # acknowledged, not yet covered by a sync
        snapshot = {}             # sync number -> pending at its submission
        ended = False
        for line in text.splitlines():
            f = line.split()
            if not f:
                continue
            k = f[0]
            if k == 'P':
                self.nblocks, self.bs, self.wce = int(f[1]), int(f[2]), int(f[3])
            elif k == 'X':
                self.extents.append((int(f[1]), int(f[2]), int(f[3])))
            elif k == 'W':
                gen, first, n, fua = (int(x) for x in f[1:5])
                if first + n > self.nblocks:
                    raise BadInput('write %d past the LUN\'s %d blocks' % (gen, self.nblocks))
                self.writes[gen] = (first, n, bool(fua))
                for b in range(first, first + n):
                    self.versions.setdefault(b, []).append(gen)
            elif k == 'A':
                gen, seq = int(f[1]), int(f[2])
                first, n, fua = self.writes[gen]
                for b in range(first, first + n):
                    self.last_acked[b] = gen
                self.acks += 1
                if fua or self.wce == 0:
                    self.guarantees[seq] = [gen]
                else:
                    pending.append(gen)
            elif k == 'S':
                snapshot[int(f[1])] = pending
                pending = []
            elif k == 'Y':
                self.guarantees[int(f[2])] = snapshot.pop(int(f[1]))
                self.syncs += 1
            elif k == 'END':
                ended = True
                break
        if self.nblocks is None or self.bs != 4096 or not ended:
            raise BadInput('journal incomplete (no P line, odd block size or no END)')
        # Ordinal of each version in its block: 0 is the initial zeros.
        self.ordinal = {}
        for b, gens in self.versions.items():
            for i, g in enumerate(gens, 1):
                self.ordinal[(b, g)] = i


def read_log(f, offset, mutate):
    """Yields (flags, sector, nr_sectors, data-or-mark-text) per entry."""
    f.seek(offset)
    sup = f.read(SECTOR)
    magic, version, nr, sectorsize = struct.unpack_from('<QQQI', sup)
    if magic != LOG_MAGIC or version != 1 or sectorsize != SECTOR:
        raise BadInput('no dm-log-writes super block (magic %#x, version %d, sector size %d)'
                       % (magic, version, sectorsize))
    pos = offset + sectorsize
    for _ in range(nr):
        f.seek(pos)
        hdr = f.read(sectorsize)
        if len(hdr) != sectorsize:
            raise BadInput('log ends inside entry header at %d' % pos)
        sector, nsec, flags, dlen = struct.unpack_from('<QQQQ', hdr)
        pos += sectorsize
        if flags & MARK:
            yield flags, 0, 0, hdr[32:32 + dlen].decode('ascii', 'replace')
            continue
        data = b''
        if not flags & DISCARD and nsec:
            data = f.read(nsec * sectorsize)
            if len(data) != nsec * sectorsize:
                raise BadInput('log ends inside entry data at %d' % pos)
            pos += nsec * sectorsize
        if mutate == 'lose-cache' and not flags & (FUA | DISCARD) and nsec:
            continue
        yield flags, sector, nsec, data


class Checker:
    def __init__(self, j, name):
        self.j, self.name = j, name
        n = j.nblocks
        self.image = bytearray(n * 4096)
        self.required = [0] * n           # minimum ordinal per block
        self.violations = 0
        self.reported = 0
        self.torn = set()
        # device sector -> LUN byte offset of that sector
        self.map = {}
        if j.extents:
            for logical, physical, length in j.extents:
                for o in range(0, length, SECTOR):
                    if logical + o < n * 4096:
                        self.map[(physical + o) // SECTOR] = logical + o
        self.identity = not j.extents

    def lun_offset(self, dev_sector):
        if self.identity:
            off = dev_sector * SECTOR
            return off if off < len(self.image) else None
        return self.map.get(dev_sector)

    def violation(self, where, msg):
        self.violations += 1
        if self.reported < MAX_REPORTED:
            self.reported += 1
            print('# %s: VIOLATION at %s: %s' % (self.name, where, msg))

    def decode(self, sec, b, s):
        """Generation of the 512 bytes sec as sector s of block b (0: zeros), or None."""
        magic, idx, blk, gen = struct.unpack_from('<IIQQ', sec)
        if magic == 0 and not any(sec):
            return 0
        crc, = struct.unpack_from('<I', sec, SECTOR - 4)
        if magic != PCUT_MAGIC or zlib.crc32(sec[:SECTOR - 4]) != crc:
            return None
        if idx != s or blk != b:
            return None
        return gen

    def superseded(self, off, new):
        """
        True if writing new at LUN offset off would replace a version of the
        sector with an older one.  dm-log-writes logs a write without FUA
        only at the next flush, so a FUA write to the same sectors that
        completed after it (the workload never overlaps writes in flight, so
        a block's versions complete in submission order) can come first in
        the log; a disk would not bring the older data back.  Data that is
        no version at all is always applied, so corruption shows.
        """
        b, s = off // 4096, off % 4096 // SECTOR
        g_new = self.decode(new, b, s)
        if g_new is None:
            return False
        g_old = self.decode(memoryview(self.image)[off:off + SECTOR], b, s)
        o_new = self.j.ordinal.get((b, g_new), 0 if g_new == 0 else None)
        o_old = self.j.ordinal.get((b, g_old), 0 if g_old == 0 else None)
        return o_new is not None and o_old is not None and o_new < o_old

    def sector_version(self, b, s):
        """Generation of sector s of block b (0: zeros), or None if not a version."""
        off = b * 4096 + s * SECTOR
        return self.decode(memoryview(self.image)[off:off + SECTOR], b, s)

    def check_block(self, b, where):
        gens = set()
        for s in range(8):
            g = self.sector_version(b, s)
            if g is None:
                self.violation(where, 'block %d sector %d is torn or foreign data' % (b, s))
                continue
            if g and (b, g) not in self.j.ordinal:
                self.violation(where, 'block %d sector %d holds generation %d, never written '
                               'there' % (b, s, g))
                continue
            gens.add(g)
            have = self.j.ordinal.get((b, g), 0)
            if have < self.required[b]:
                want = self.j.versions[b][self.required[b] - 1]
                self.violation(where, 'block %d sector %d holds generation %d; generation %d '
                               'was guaranteed' % (b, s, g, want))
        if len(gens) > 1:
            self.torn.add((b, tuple(sorted(gens))))

    def run(self, entries):
        cuts = flush_cuts = marks = started = superseded = 0
        for i, (flags, sector, nsec, data) in enumerate(entries):
            changed = set()
            if flags & MARK:
                if data == 'pc-start':
                    started = 1
                    changed = set(range(self.j.nblocks))
                elif data.startswith('pc-'):
                    marks += 1
                    for g in self.j.guarantees.get(int(data[3:]), ()):
                        first, n, _ = self.j.writes[g]
                        for b in range(first, first + n):
                            o = self.j.ordinal[(b, g)]
                            if o > self.required[b]:
                                self.required[b] = o
                                changed.add(b)
            else:
                for k in range(nsec):
                    off = self.lun_offset(sector + k)
                    if off is None:
                        continue
                    new = bytes(SECTOR) if flags & DISCARD else data[k * SECTOR:(k + 1) * SECTOR]
                    if self.superseded(off, new):
                        superseded += 1
                        continue
                    self.image[off:off + SECTOR] = new
                    changed.add(off // 4096)
            if not started:
                continue
            cuts += 1
            flush_cuts += bool(flags & FLUSH)
            for b in sorted(changed):
                self.check_block(b, 'cut %d (after log entry %d)' % (cuts, i))
        if not started:
            raise BadInput('no pc-start mark in the log')
        # The whole log: every block at its last acknowledged version.
        for b in range(self.j.nblocks):
            want = self.j.last_acked.get(b, 0)
            for s in range(8):
                g = self.sector_version(b, s)
                if g != want:
                    self.violation('end of log', 'block %d sector %d holds generation %s, '
                                   'last acknowledged %d' % (b, s, g, want))
                    break
        self.superseded_sectors = superseded
        return cuts, flush_cuts, marks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--log', required=True)
    ap.add_argument('--log-offset', type=int, default=0)
    ap.add_argument('--journal', required=True)
    ap.add_argument('--journal-offset', type=int, default=0)
    ap.add_argument('--name', default='powercut')
    ap.add_argument('--mutate', choices=['lose-cache'])
    a = ap.parse_args()
    try:
        with open(a.journal, 'rb') as f:
            f.seek(a.journal_offset)
            text = f.read(64 << 20).split(b'\0', 1)[0].decode('ascii')
        j = Journal(text)
        c = Checker(j, a.name)
        with open(a.log, 'rb') as f:
            cuts, flush_cuts, marks = c.run(read_log(f, a.log_offset, a.mutate))
    except (BadInput, OSError, ValueError, KeyError, IndexError) as e:
        print('# %s: unreadable input: %s' % (a.name, e))
        return 2
    print('# %s: %d cut points checked (%d at flushes), %d marks, %d writes (%d acknowledged),'
          ' %d syncs, WCE %d; %d blocks seen with sectors of different versions, %d sectors'
          ' not replayed over newer data; %d violations'
          % (a.name, cuts, flush_cuts, marks, len(j.writes), j.acks, j.syncs, j.wce,
             len(c.torn), c.superseded_sectors, c.violations))
    print('CUTS %d VIOLATIONS %d' % (cuts, c.violations))
    return 1 if c.violations else 0


if __name__ == '__main__':
    sys.exit(main())

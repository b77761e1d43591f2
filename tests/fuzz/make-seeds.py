#!/usr/bin/env python3
# Writes the seed corpora in tests/fuzz/corpus/ (committed; re-run after
# changing an input format).  Seeds are well-formed inputs that reach deep
# into each parser, for the fuzzers to mutate from.
# SPDX-License-Identifier: GPL-2.0-or-later
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def vu(req, payload=b"", flags=1):
    return struct.pack("<III", req, flags, len(payload)) + payload


def u64(v):
    return struct.pack("<Q", v)


def state(i, n):
    return struct.pack("<II", i, n)


# vhost-user: QEMU 7.2's realize sequence, then a full ring bring-up.
UVA = 0x7F0000000000
realize = (vu(1) + vu(15) + vu(16, u64(0x8B29)) + vu(17) + vu(36) + vu(3) + vu(1) +
           vu(13, u64(0x100)) + vu(14, u64(0x100)))
write("fuzz-vhost-user", "realize", b"\x00" + realize)
mem = struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0, 0x10000, UVA, 0) + b"\x00" * 32 * 7
ring = (vu(2, u64((1 << 32) | (1 << 28) | (1 << 29) | (1 << 30))) + vu(5, mem) +
        vu(8, state(2, 16)) +
        vu(9, struct.pack("<IIQQQQ", 2, 0, UVA + 0x1000, UVA + 0x2000, UVA + 0x1100, 0)) +
        vu(10, state(2, 0)) + vu(12, u64(2 | 0x100)) + vu(18, state(2, 1)) +
        vu(11, state(2, 0)) + vu(34) + vu(4))
write("fuzz-vhost-user", "ring-bringup", b"\x01" + ring)
write("fuzz-vhost-user", "add-rem-reg", b"\x01" +
      vu(37, u64(0) + struct.pack("<QQQQ", 0, 0x10000, UVA, 0)) +
      vu(38, u64(0) + struct.pack("<QQQQ", 0, 0x10000, UVA, 0)) + vu(40, flags=9))
write("fuzz-vhost-user", "inflight", b"\x00" + vu(16, u64(1 << 12)) +
      vu(31, struct.pack("<QQHH", 0, 0, 4, 16)))

# virtqueue: 16 entries, EVENT_IDX|INDIRECT, base 0, 63 iovecs; one direct
# chain and one indirect chain.
GPA = 0x10000
ram = bytearray(0x10000)
struct.pack_into("<QIHH", ram, 0, GPA + 0x3000, 51, 1, 1)
struct.pack_into("<QIHH", ram, 16, GPA + 0x3100, 108, 2, 0)
struct.pack_into("<QIHH", ram, 32, GPA + 0x4000, 32, 4, 0)     # indirect table
struct.pack_into("<QIHH", ram, 0x4000, GPA + 0x3200, 51, 1, 1)
struct.pack_into("<QIHH", ram, 0x4010, GPA + 0x3300, 4096, 2, 0)
struct.pack_into("<HHHH", ram, 256, 0, 2, 0, 2)
write("fuzz-virtqueue", "two-chains", bytes([4, 3, 0, 0, 62]) + bytes(ram[:0x4100]))

# The same two chains on a packed ring (features | 8): base 0x80008000 (slot
# 0, both wrap counters 1); descriptors are addr, len, id, flags with AVAIL
# (bit 7) set for lap 1, the buffer id in each of a chain's descriptors.
ram = bytearray(0x10000)
struct.pack_into("<QIHH", ram, 0, GPA + 0x3000, 51, 0, 0x80 | 1)
struct.pack_into("<QIHH", ram, 16, GPA + 0x3100, 108, 0, 0x80 | 2)
struct.pack_into("<QIHH", ram, 32, GPA + 0x4000, 32, 1, 0x80 | 4)   # indirect table
struct.pack_into("<QIHH", ram, 0x4000, GPA + 0x3200, 51, 0, 0)
struct.pack_into("<QIHH", ram, 0x4010, GPA + 0x3300, 4096, 0, 2)
write("fuzz-virtqueue", "packed-two-chains",
      bytes([4, 3 | 8, 0, 0x80, 0, 0x80, 62]) + bytes(ram[:0x4100]))

# The same ring taken over from an inflight record (features | 16): the
# first chain (slots 0-1) in flight in entries 0-1, the rest free from
# entry 2; the record's 1024 bytes come before the RAM.  The new back-end
# resubmits the chain from the record and pops the indirect one at slot 2.
rec = bytearray(1024)
struct.pack_into("<QHHHHHHBB", rec, 0, 0, 1, 16, 2, 2, 0, 0, 1, 1)
struct.pack_into("<BBHHHQHHIQ", rec, 32, 1, 0, 1, 1, 2, 5, 0, 0x80 | 1, 51, GPA + 0x3000)
struct.pack_into("<BBHHHQHHIQ", rec, 64, 0, 0, 2, 0, 0, 0, 0, 0x80 | 2, 108, GPA + 0x3100)
for i in range(2, 16):
    struct.pack_into("<H", rec, 32 + 32 * i + 2, i + 1)
write("fuzz-virtqueue", "packed-inflight-restore",
      bytes([4, 3 | 8 | 16, 0, 0x80, 0, 0x80, 62]) + bytes(rec) + bytes(ram[:0x4100]))

# The NAA designator the SCSI layer derives for the fuzzer's LUN "fuzz-ram"
# (hw/scsi/scsi-disk.c: FNV-1a of vendor, product and the serial, itself
# FNV-1a of the name), so that an EXTENDED COPY seed names a LUN it reaches.
def fnv1a(h, s):
    for c in s.encode():
        h = ((h ^ c) * 0x100000001b3) & (2**64 - 1)
    return h


def fuzz_ram_naa():
    basis = 0xcbf29ce484222325
    serial = "VHS%013x" % (fnv1a(basis, "fuzz-ram") & (2**52 - 1))
    h = fnv1a(fnv1a(fnv1a(basis, "VHOSTSCS"), "RAM DISK"), serial)
    return 5 << 60 | (h & (2**60 - 1))


# An EXTENDED COPY (LID1) parameter list: E4h descriptors of 512-byte LUNs,
# block-to-block segments (src, dst, blocks, src lba, dst lba).
def xcopy_list(list_id, naas, segs):
    p = struct.pack(">BBHIII", list_id, 0, 32 * len(naas), 0, 28 * len(segs), 0)
    for naa in naas:
        p += bytes([0xE4, 0, 0, 0, 1, 3, 0, 8]) + struct.pack(">Q", naa) + b"\0" * 13 + \
            bytes([0, 2, 0])
    for src, dst, n, slba, dlba in segs:
        p += struct.pack(">BBHHH2xHQQ", 2, 0, 0x18, src, dst, n, slba, dlba)
    return p


# SCSI CDBs: lun selector, out_len, in_len, split, cdb_len, cdb (32), data.
def cdb_seed(lun, out_len, in_len, cdb, data=b""):
    c = bytes(cdb) + b"\x00" * (32 - len(cdb))
    return (bytes([lun]) + struct.pack("<HH", out_len, in_len) + bytes([0x80 if out_len else 7]) +
            bytes([len(cdb) - 6]) + c + data)

seeds = {
    "inquiry": cdb_seed(0, 0, 96, [0x12, 0, 0, 0, 96, 0]),
    "vpd83": cdb_seed(0, 0, 255, [0x12, 1, 0x83, 0, 255, 0]),
    "readcap16": cdb_seed(0, 0, 32, [0x9E, 0x10] + [0] * 8 + [0, 0, 0, 32, 0, 0]),
    "read10": cdb_seed(0, 0, 4096, [0x28, 0, 0, 0, 0, 8, 0, 0, 8, 0]),
    "write10": cdb_seed(0, 4096, 0, [0x2A, 8, 0, 0, 0, 8, 0, 0, 8, 0], b"\xAB" * 512),
    "unmap": cdb_seed(0, 24, 0, [0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0],
                      struct.pack(">HH4x", 22, 16) + struct.pack(">QI4x", 0, 8)),
    "writesame16": cdb_seed(1, 4096, 0, [0x93, 8] + [0] * 8 + [0, 0, 0, 16, 0, 0]),
    "modesense": cdb_seed(0, 0, 255, [0x1A, 0, 0x3F, 0, 255, 0]),
    "modeselect": cdb_seed(0, 24, 0, [0x15, 0x10, 0, 0, 24, 0],
                           bytes([23, 0, 0, 0, 0x08, 18, 0x00]) + b"\x00" * 17),
    "rsoc": cdb_seed(0, 0, 4096, [0xA3, 0x0C, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0]),
    "verify": cdb_seed(0, 512, 0, [0x2F, 2, 0, 0, 0, 0, 0, 0, 1, 0], b"\x00" * 512),
    "sync": cdb_seed(1, 0, 0, [0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
    "pr-register": cdb_seed(0, 24, 0, [0x5F, 0, 0, 0, 0, 0, 0, 0, 24, 0],
                            struct.pack(">QQ8x", 0, 0xABCD)),
    "pr-reserve": cdb_seed(0, 24, 0, [0x5F, 1, 5, 0, 0, 0, 0, 0, 24, 0],
                           struct.pack(">QQ8x", 0xABCD, 0)),
    "pr-in-full-status": cdb_seed(0, 0, 1024, [0x5E, 3, 0, 0, 0, 0, 0, 4, 0, 0]),
    # REGISTER AND MOVE to an iSCSI TransportID ("iqn.2026-12.fuzz:b"), port 1.
    "pr-register-and-move": cdb_seed(0, 48, 0, [0x5F, 7, 0, 0, 0, 0, 0, 0, 48, 0],
                                     struct.pack(">QQxBHI", 0xABCD, 0xBEEF, 0, 1, 24) +
                                     b"\x05\x00\x00\x14" + b"iqn.2026-12.fuzz:b".ljust(20, b"\0")),
    "reserve6": cdb_seed(0, 0, 0, [0x16, 0, 0, 0, 0, 0]),
    # EXTENDED COPY within the ram LUN (its own NAA twice), 8 blocks 0 -> 16, list id 1.
    "xcopy": cdb_seed(0, 108, 0, [0x83] + [0] * 12 + [108, 0, 0],
                      xcopy_list(1, [fuzz_ram_naa(), fuzz_ram_naa()], [(0, 1, 8, 0, 16)])),
    "rcr-copy-status": cdb_seed(0, 0, 64, [0x84, 0, 1] + [0] * 10 + [64, 0, 0]),
    "rcr-operating-parameters": cdb_seed(0, 0, 64, [0x84, 3] + [0] * 11 + [64, 0, 0]),
}
for name, data in seeds.items():
    write("fuzz-scsi-cdb", name, data)

# virtio-scsi: flags, extra out, extra in, [sizes], header (51 bytes) + data.
def vs_req(flags, cdb, out_extra=0, in_extra=0, data=b""):
    hdr = bytes([1, 0, 0x40, 0]) + b"\x00" * 4 + struct.pack("<Q", 7) + bytes([0, 0, 0])
    hdr += bytes(cdb) + b"\x00" * (32 - len(cdb))
    s = bytes([flags, 8])
    if flags & 1:
        s += struct.pack("<H", out_extra)
    s += bytes([8])
    if flags & 2:
        s += struct.pack("<H", in_extra)
    return s + hdr + data + b"\x00" * (out_extra - len(data) if flags & 1 else 0)

write("fuzz-virtio-scsi", "inquiry-read", vs_req(0x02, [0x12, 0, 0, 0, 96, 0], in_extra=96) +
      vs_req(0x12, [0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0], in_extra=4096))
write("fuzz-virtio-scsi", "write", vs_req(0x05, [0x2A, 0, 0, 0, 0, 0, 0, 0, 1, 0], out_extra=512,
                                          data=b"\x5A" * 512))
write("fuzz-virtio-scsi", "report-luns", vs_req(0x02, [0xA0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0],
                                                in_extra=64))

# virtio-scsi control queue: number of READ/WRITE(10) commands, per command
# flags (bit 0 write, bit 1 LUN 1, bits 4-6 blocks - 1) and LBA; then control
# requests: kind (0/1 TMF, 2 AN, 3 any type), flags (bit 0 well-formed LUN,
# given as one byte, else 8 raw bytes; bit 1 raw 64-bit tag / AN subscribe;
# bits 2-3 request length exact/short/long; bits 4-5 response length
# exact/short/long/none; bits 6, 7 split), then the request's fields.
def ctrl_cmds(*cmds):
    return bytes([len(cmds)]) + b"".join(bytes(c) for c in cmds)

def tmf(sub, flags=1, lun=b"\x00", tag=b"\x00", lens=b""):
    return bytes([0, flags, sub]) + lun + tag + lens

def an(flags=1, lun=b"\x00", events=1, lens=b""):
    return bytes([2, flags]) + lun + struct.pack("<I", events) + lens

cmds = ctrl_cmds((0x01, 0), (0x00, 0), (0x02, 8), (0x71, 16))
write("fuzz-virtio-scsi-ctrl", "every-tmf-racing-its-tasks",
      cmds + b"".join(tmf(s, tag=bytes([s % 4])) for s in range(8)))
write("fuzz-virtio-scsi-ctrl", "abort-task-racing-a-write", ctrl_cmds((0x71, 0)) + tmf(0))
write("fuzz-virtio-scsi-ctrl", "an-query-and-subscribe",
      ctrl_cmds() + an() + an(flags=3, events=0xFFFFFFFF))
write("fuzz-virtio-scsi-ctrl", "short-and-long-buffers",
      cmds + tmf(0, flags=0x05, lens=b"\x10") + tmf(5, flags=0x31) +
      tmf(6, flags=0x09, lens=b"\x20") + tmf(7, flags=0x21, lens=b"\x07") +
      an(flags=0x15, lens=b"\x03\x02") + tmf(1, flags=0xC1))
write("fuzz-virtio-scsi-ctrl", "bad-lun-addresses",
      cmds + tmf(5, flags=0, lun=bytes([2, 0, 0, 0, 0, 0, 0, 0])) +
      tmf(5, flags=0, lun=bytes([1, 5, 0x40, 0, 0, 0, 0, 0])) +
      tmf(0, flags=0, lun=bytes([1, 0, 0x80, 0, 0, 0, 0, 0])) +
      tmf(6, flags=0, lun=bytes([1, 0, 0x40, 1, 0, 0, 0, 1])) +
      an(flags=0, lun=bytes([1, 1, 0x40, 0, 0, 0, 0, 0])) + tmf(4, flags=3, tag=b"\xff" * 8))
write("fuzz-virtio-scsi-ctrl", "unknown-type-and-subtype",
      cmds + bytes([3, 0]) + struct.pack("<I", 0x1234) + b"\x00" * 20 +
      bytes([0, 1, 0xF0]) + struct.pack("<I", 99) + b"\x00\x01")

# lio restore files: targetcli's saveconfig.json as rtslib_fb writes it (the
# unit tests' fixtures), a hand-shortened one and ours; the first byte is
# --partial.
FIXTURES = os.path.join(HERE, "..", "unit", "data", "targetcli")
for name in ("vhost", "block4k", "mixed"):
    with open(os.path.join(FIXTURES, name + ".json"), "rb") as f:
        text = f.read()
    write("fuzz-lio-targetcli", name, b"\x00" + text)
    write("fuzz-lio-targetcli", name + "-partial", b"\x01" + text)
write("fuzz-lio-targetcli", "small", b"\x01" +
      b'{"storage_objects": [{"plugin": "ramdisk", "name": "r", "size": 1048576, "wwn": "w"}], '
      b'"targets": [{"fabric": "vhost", "wwn": "naa.5001405aaaaaaaaa", "tpgs": [{"tag": 1, '
      b'"luns": [{"index": 0, "storage_object": "/backstores/ramdisk/r", "alias": "a"}]}]}]}')
write("fuzz-lio-targetcli", "ours", b"\x00" +
      b'{"version": 1, "targets": [{"wwpn": "naa.5001405aaaaaaaaa", "tpgt": 1, "nexus": "", '
      b'"luns": [{"lun": 0, "type": "ram", "path": "", "size": 1048576, "backstore": "x"}]}]}')

# control socket: JSON-RPC lines as vhost-scsi-ctl sends them, then the
# ways a client goes wrong (fuzz-control.c's methods: lun-list, lun-resize,
# echo, fail, later).
def rpc(method, params=None, rid=1):
    import json
    req = {"jsonrpc": "2.0", "method": method, "id": rid}
    if params is not None:
        req["params"] = params
    return json.dumps(req, separators=(",", ":")).encode() + b"\n"


write("fuzz-control", "list-and-resize",
      rpc("lun-list") + rpc("lun-resize", {"lun": 0, "size": 2 << 20}, 2) +
      rpc("lun-resize", {"target": 0, "lun": 1, "size": 2 << 30}, "x") + rpc("lun-list", {}, 3))
write("fuzz-control", "echo-fail-later",
      rpc("echo", {"a": [1, {"b": None}], "c": "d"}) + rpc("fail", rid=2) +
      rpc("later", rid=3) + rpc("later") + b'{"jsonrpc":"2.0","method":"echo"}\n')
write("fuzz-control", "errors",
      b"not json\n" + b'{"jsonrpc":"1.0","method":"echo","id":1}\n' +
      b'{"jsonrpc":"2.0","method":"nope","id":[1]}\n' +
      b'{"jsonrpc":"2.0","method":"lun-resize","params":{"lun":"0"},"id":4}\r\n' +
      b'{"jsonrpc":"2.0","method":"lun-resize","params":{"lun":9},"id":5}\n' +
      b'[[[[[[[[[[1]]]]]]]]]]\n' + b'{"a":"\xff\xfe"}\n' + b"\n\n")
write("fuzz-control", "too-long", rpc("echo", {"s": "x" * 2100}) + rpc("lun-list"))

# LUN SPECs: the first byte picks parse_full (0), parse (1), a bare SPEC (2)
# or redaction (3); bit 2 allows the test backends.
for i, spec in enumerate([
        b"\x000:1=file:/var/d.img,direct,block-size=4096,size=1G",
        b"\x002=ram:64M,ro,block-size=512,phys-block-size=4096",
        b"\x01255:16383=null:1T,fill=none,block-size=4096",
        b"\x00" + b"1=iscsi://user%secret@127.0.0.1:3260/iqn.2026-01.test:t/1,ro,queue-depth=32,"
        b"sessions=2,initiator-name=iqn.2026-01.test:i,login-timeout=5",
        b"\x003=rbd:pool/image@snap,conf=/etc/ceph/ceph.conf,id=admin,keyring=/k,ro",
        b"\x054=hold:1M,while=/tmp/hold,block-size=512",
        b"\x02file:/a,,b,,c,ro",
        b"\x031=iscsi://u%p/w@h/iqn.x/0",
        b"\x00x=ram:0", b"\x000:1=ram:1M,ro,ro", b"\x00=file:"]):
    write("fuzz-lun-spec", "spec-%02d" % i, spec)

# --config files as config-save writes them, and near misses.
write("fuzz-config", "saved",
      b'{"version":1,"backends":[{"name":"data","spec":"file:/var/d.img,direct",'
      b'"implicit":false,"qos":{"iops":1000,"bandwidth":1048576}},'
      b'{"name":"r","spec":"ram:1M","implicit":true}],'
      b'"controllers":[{"name":"default","socket":"/run/vm1.sock","initiator":"iqn.x:y",'
      b'"luns":[{"target":0,"lun":1,"backend":"data"}]},'
      b'{"name":"vm2","socket":"/run/vm2.sock","queues":2,"allow_uid":[0,1000],'
      b'"allow_gid":[100],"socket_group":"kvm","luns":[{"target":1,"lun":2,"backend":"r"}]}]}')
write("fuzz-config", "empty", b'{"version":1,"backends":[],"controllers":[]}')
write("fuzz-config", "wrong-types",
      b'{"version":1,"backends":[{"name":1,"spec":"ram:1M"}],"controllers":[{"name":"x",'
      b'"luns":[{"target":"0","lun":1,"backend":"r"}]}]}')
write("fuzz-config", "version-2", b'{"version":2,"backends":[],"controllers":[]}')

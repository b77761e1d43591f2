#!/usr/bin/env python3
# The targetcli saveconfig.json fixtures of the lio unit tests, written by
# targetcli-fb's own code: each scenario lays out a configfs tree in a
# temporary directory as a Linux 6.1 kernel shows it (the attribute, info,
# wwn, ALUA and LUN files rtslib_fb reads), points rtslib_fb's CFSNode at it,
# and writes RTSRoot().dump() the way RTSRoot.save_to_file() does (what
# `targetcli saveconfig` runs).  Only the kernel is faked; every key, type
# and value of the output is rtslib_fb's.
#
#   targetcli-dump.py OUTDIR           write OUTDIR/<scenario>.json
#   targetcli-dump.py --check DIR      TAP: each DIR/<scenario>.json is what
#                                      rtslib_fb writes today (skips when
#                                      python3-rtslib-fb is not installed)
#   targetcli-dump.py --restore FILE   rtslib_fb's restore() of FILE on a fake
#                                      kernel that makes configfs's files on
#                                      mkdir and write: exit 0 if it reports
#                                      no error and dumps FILE again (modulo
#                                      ordering and the attributes derived
#                                      from the backing), 1 if not, 77 when
#                                      python3-rtslib-fb is not installed
#
# SPDX-License-Identifier: GPL-2.0-or-later
import json
import os
import sys
import tempfile

# ---------------------------------------------------------- the fake kernel

# sbc_attrib_attrs of Linux 6.1 (target_core_configfs.c): name -> (writable,
# value).  Values are target_alloc_device()'s defaults, then what the
# backstore's configure_device sets from its backing (per kind below).
COMMON_ATTRS = {
    "emulate_model_alias": (True, 0), "emulate_dpo": (True, 1),
    "emulate_fua_write": (True, 1), "emulate_fua_read": (True, 1),
    "emulate_write_cache": (True, 0), "emulate_ua_intlck_ctrl": (True, 0),
    "emulate_tas": (True, 1), "emulate_tpu": (True, 0), "emulate_tpws": (True, 0),
    "emulate_caw": (True, 1), "emulate_3pc": (True, 1), "emulate_pr": (True, 1),
    "pi_prot_type": (True, 0), "hw_pi_prot_type": (False, 0), "pi_prot_format": (True, 0),
    "pi_prot_verify": (True, 0), "enforce_pr_isids": (True, 1), "is_nonrot": (True, 0),
    "emulate_rest_reord": (True, 0), "force_pr_aptpl": (True, 0),
    "hw_block_size": (False, 512), "block_size": (True, 512),
    "hw_max_sectors": (False, 16384), "optimal_sectors": (True, 16384),
    "hw_queue_depth": (False, 128), "queue_depth": (True, 128),
    "max_unmap_lba_count": (True, 0), "max_unmap_block_desc_count": (True, 0),
    "unmap_granularity": (True, 0), "unmap_granularity_alignment": (True, 0),
    "unmap_zeroes_data": (True, 0), "max_write_same_len": (True, 0),
    "alua_support": (False, 1), "pgr_support": (False, 1),
}
# What fd_configure_device / iblock_configure_device set (a file, a disk).
KIND_ATTRS = {
    "fileio": {"max_unmap_lba_count": 8192, "max_unmap_block_desc_count": 1,
               "unmap_granularity": 1, "max_write_same_len": 4096},
    "iblock": {"hw_max_sectors": 2560, "optimal_sectors": 2560, "is_nonrot": 1,
               "max_unmap_lba_count": 4194303, "max_unmap_block_desc_count": 1,
               "unmap_granularity": 8, "unmap_zeroes_data": 1, "max_write_same_len": 65535},
    "rd_mcp": {"hw_max_sectors": 1024, "optimal_sectors": 1024},
    "pscsi": {"alua_support": 0, "pgr_support": 0, "hw_max_sectors": 1024,
              "optimal_sectors": 1024},
}
# core_alua_allocate_tg_pt_gp(): the default ALUA group every device has.
ALUA_DEFAULT = {
    "alua_access_state": "0", "alua_access_status": "None", "alua_write_metadata": "0",
    "alua_access_type": "Implicit and Explicit", "preferred": "0",
    "nonop_delay_msecs": "100", "trans_delay_msecs": "0", "implicit_trans_secs": "0",
    "alua_support_offline": "1", "alua_support_standby": "1",
    "alua_support_transitioning": "1", "alua_support_active_nonoptimized": "1",
    "alua_support_unavailable": "1", "alua_support_active_optimized": "1",
    "alua_support_lba_dependent": "0", "tg_pt_gp_id": "0", "members": "",
}


def put(path, value, writable=True):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("%s\n" % value)
    os.chmod(path, 0o644 if writable else 0o444)


class Kernel:
    def __init__(self, root):
        self.t = os.path.join(root, "target")
        self.hba = {}
        os.makedirs(os.path.join(self.t, "core", "alua"))
        # targetcli loads iscsi with the others; its discovery auth is off.
        put(os.path.join(self.t, "iscsi", "discovery_auth", "enforce_discovery_auth"), 0)

    def backstore(self, kind, name, serial, info, udev_path="", attrs=None, alua=True):
        index = self.hba.get(kind, 0)
        self.hba[kind] = index + 1
        so = os.path.join(self.t, "core", "%s_%d" % (kind, index), name)
        put(os.path.join(os.path.dirname(so), "hba_info"),
            "HBA Index: %d plugin: %s version: v5.0" % (index, kind))
        values = dict(COMMON_ATTRS)
        values.update({k: (COMMON_ATTRS[k][0], v) for k, v in KIND_ATTRS[kind].items()})
        values.update({k: (True, v) for k, v in (attrs or {}).items()})
        for a, (w, v) in values.items():
            put(os.path.join(so, "attrib", a), v, w)
        put(os.path.join(so, "info"), info)
        put(os.path.join(so, "udev_path"), udev_path)
        put(os.path.join(so, "enable"), 1)
        put(os.path.join(so, "wwn", "vpd_unit_serial"), "T10 VPD Unit Serial Number: %s" % serial)
        os.makedirs(os.path.join(so, "alua"))    # a pass-through device's stays empty
        if alua:
            for k, v in ALUA_DEFAULT.items():
                put(os.path.join(so, "alua", "default_tg_pt_gp", k), v)
        return so

    def fileio(self, name, serial, path, size, buffered=True, aio=False, attrs=None):
        a = {"emulate_write_cache": 1 if buffered else 0}
        a.update(attrs or {})
        return self.backstore("fileio", name, serial,
                              "Status: ACTIVATED  Max Queue Depth: 128  SectorSize: 512  "
                              "HwMaxSectors: 16384\n        TCM FILEIO ID: 0        File: %s  "
                              "Size: %d  Mode: %s Async: %d" %
                              (path, size, "Buffered-WCE" if buffered else "O_DSYNC", aio),
                              path, a)

    def iblock(self, name, serial, dev, readonly=False):
        return self.backstore("iblock", name, serial,
                              "Status: ACTIVATED  Max Queue Depth: 128  SectorSize: 512  "
                              "HwMaxSectors: 2560\n        iBlock device: vdb  UDEV PATH: %s  "
                              "readonly: %d\n        Major: 254 Minor: 16  CLAIMED: IBLOCK"
                              % (dev, readonly), dev)

    def rd_mcp(self, name, serial, pages, nullio=False):
        return self.backstore("rd_mcp", name, serial,
                              "Status: ACTIVATED  Max Queue Depth: 128  SectorSize: 512  "
                              "HwMaxSectors: 1024\n        TCM RamDisk ID: 0  RamDisk "
                              "Makeup: rd_mcp\n        PAGES/PAGE_SIZE: %d*4096  SG_table_count:"
                              " 1  nullio: %d" % (pages, nullio))

    def pscsi(self, name, dev):
        return self.backstore("pscsi", name, "", "Status: ACTIVATED  Max Queue Depth: 0  "
                              "SectorSize: 512  HwMaxSectors: 1024\n        SCSI Device Bus "
                              "Location: Channel ID: 0 Target ID: 1 LUN: 0 Host ID: 2\n        "
                              "Vendor: QEMU     Model: QEMU CD-ROM      Rev: 2.5+", dev,
                              alua=False)

    def tpg(self, fabric, wwn, tag, nexus=None, attrs=None, params=None, enable=None):
        tpg = os.path.join(self.t, fabric, wwn, "tpgt_%d" % tag)
        for g in ("lun", "acls", "np", "param", "attrib", "auth"):
            os.makedirs(os.path.join(tpg, g), exist_ok=True)
        if nexus is not None:
            put(os.path.join(tpg, "nexus"), nexus)
        for a, v in (attrs or {}).items():
            put(os.path.join(tpg, "attrib", a), v)
        for p, v in (params or {}).items():
            put(os.path.join(tpg, "param", p), v)
        if enable is not None:
            put(os.path.join(tpg, "enable"), enable)
        return tpg

    def lun(self, tpg, index, so, alias, alua=True):
        lun = os.path.join(tpg, "lun", "lun_%d" % index)
        os.makedirs(lun)
        put(os.path.join(lun, "alua_tg_pt_gp"),
            "TG Port Alias: default_tg_pt_gp\nTG Port Group ID: 0" if alua else "")
        os.symlink(so, os.path.join(lun, alias))


# ---------------------------------------------------------- the scenarios

VHOST_TPG = {"fabric_prot_type": 0}


def vhost(k):
    """What vhost-scsi-ctl maps entirely: vhost targets on fileio, block, ramdisk."""
    d1 = k.fileio("disk1", "5f3ab6a0-0d6e-4a3b-9d0a-2d4c7b1e0f11", "/srv/vm1.img", 1073741824)
    d2 = k.iblock("disk2", "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9", "/dev/vdb")
    d3 = k.fileio("disk3", "1e2d3c4b-5a69-4788-97a6-b5c4d3e2f101", "/srv/vm2.img", 2147483648,
                  buffered=False, aio=True)
    rd = k.rd_mcp("scratch", "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", 16384)
    nl = k.rd_mcp("nothing", "aabbccdd-eeff-4011-8233-445566778899", 262144, nullio=True)
    t = k.tpg("vhost", "naa.5001405aaaaaaaa1", 1, "naa.5001405bbbbbbbb1", VHOST_TPG)
    k.lun(t, 0, d1, "c0ffee0001")
    k.lun(t, 1, d2, "c0ffee0002")
    t = k.tpg("vhost", "naa.5001405aaaaaaaa2", 1, "naa.5001405bbbbbbbb2", VHOST_TPG)
    k.lun(t, 0, d3, "c0ffee0003")
    t = k.tpg("vhost", "naa.5001405aaaaaaaa2", 2, "naa.5001405bbbbbbbb3", VHOST_TPG)
    k.lun(t, 0, rd, "c0ffee0004")
    k.lun(t, 3, nl, "c0ffee0005")


def block4k(k):
    """One fileio LUN with 4096-byte blocks, as after `set attribute block_size=4096`."""
    d = k.fileio("big", "2b3c4d5e-6f70-4182-93a4-b5c6d7e8f901", "/srv/big.img", 4294967296,
                 attrs={"block_size": 4096})
    t = k.tpg("vhost", "naa.5001405cccccccc1", 1, "naa.5001405dddddddd1", VHOST_TPG)
    k.lun(t, 0, d, "b16b00b500")


def mixed(k):
    """A host serving iSCSI and loopback too: only part of it is vhost-scsi-ctl's."""
    ok = k.fileio("vm1", "3c4d5e6f-7081-4293-a4b5-c6d7e8f90a12", "/srv/ok.img", 1073741824)
    thin = k.fileio("thin", "4d5e6f70-8192-43a4-b5c6-d7e8f90a1b23", "/srv/thin.img",
                    1073741824, attrs={"emulate_tpu": 1})
    wt = k.fileio("wt", "5e6f7081-92a3-44b5-c6d7-e8f90a1b2c34", "/srv/wt.img", 1073741824,
                  buffered=False)
    iq = k.fileio("iscsidisk", "6f708192-a3b4-45c6-d7e8-f90a1b2c3d45", "/srv/iscsi.img",
                  1073741824)
    k.fileio("spare", "708192a3-b4c5-46d7-e8f9-0a1b2c3d4e56", "/srv/spare.img", 1073741824)
    cd = k.pscsi("cdrom", "/dev/sr0")
    t = k.tpg("vhost", "naa.5001405eeeeeeee1", 1, "naa.5001405ffffffff1", VHOST_TPG)
    k.lun(t, 0, ok, "a1a1a1a1a1")
    k.lun(t, 1, thin, "a2a2a2a2a2")
    k.lun(t, 2, wt, "a3a3a3a3a3")
    k.lun(t, 3, cd, "a4a4a4a4a4", alua=False)
    t = k.tpg("iscsi", "iqn.2003-01.org.linux-iscsi.host.x8664:sn.0123456789ab", 1,
              attrs={"authentication": 0, "generate_node_acls": 1,
                     "demo_mode_write_protect": 0, "cache_dynamic_acls": 1},
              params={"HeaderDigest": "CRC32C,None", "MaxConnections": "1"}, enable=1)
    os.makedirs(os.path.join(t, "np", "0.0.0.0:3260"))
    k.lun(t, 0, iq, "b1b1b1b1b1")
    t = k.tpg("loopback", "naa.5001405123456789", 1, "naa.5001405987654321")
    k.lun(t, 0, iq, "b2b2b2b2b2")


SCENARIOS = {"vhost": vhost, "block4k": block4k, "mixed": mixed}


def dump(scenario):
    """saveconfig.json of a scenario, as RTSRoot.save_to_file() writes it."""
    from rtslib_fb import node, root, tcm
    with tempfile.TemporaryDirectory() as d:
        k = Kernel(d)
        SCENARIOS[scenario](k)
        node.CFSNode.configfs_dir = k.t
        root.mount_configfs = lambda: None   # the fake needs no mount
        tcm.bs_cache.clear()
        return json.dumps(root.RTSRoot().dump(), sort_keys=True, indent=2) + "\n"


# ------------------------------------------- rtslib's restore, on the fake

def control_info(kind, control, path):
    """The info file the kernel shows once a backstore of control is enabled."""
    c = dict(o.split("=", 1) for o in control.split(",") if "=" in o)
    head = "Status: ACTIVATED  Max Queue Depth: 128  SectorSize: 512  HwMaxSectors: 16384\n"
    if kind == "fileio":
        return head + ("        TCM FILEIO ID: 0        File: %s  Size: %s  Mode: %s Async: %s" %
                       (c.get("fd_dev_name"), c.get("fd_dev_size", 0),
                        "Buffered-WCE" if c.get("fd_buffered_io") == "1" else "O_DSYNC",
                        c.get("fd_async_io", "0")))
    if kind == "iblock":
        return head + ("        iBlock device: vdb  UDEV PATH: %s  readonly: %s\n        Major: "
                       "254 Minor: 16  CLAIMED: IBLOCK" % (c.get("udev_path"),
                                                           c.get("readonly", "0")))
    return head + ("        TCM RamDisk ID: 0  RamDisk Makeup: rd_mcp\n        PAGES/PAGE_SIZE: "
                   "%s*4096  SG_table_count: 1  nullio: %s" % (c.get("rd_pages"),
                                                             c.get("rd_nullio", "0")))


def restore(config):
    """rtslib's restore() of config on a fake kernel: its errors, and the dump after."""
    from rtslib_fb import alua, fabric, node, root, target, tcm, utils
    with tempfile.TemporaryDirectory() as d:
        k = Kernel(d)
        node.CFSNode.configfs_dir = k.t
        root.mount_configfs = lambda: None
        tcm.bs_cache.clear()
        # The kernel's side: what a mkdir in configfs makes, what a write does.
        controls = {}
        make = node.CFSNode._create_in_cfs_ine
        real_fwrite = utils.fwrite

        def made(self, mode):
            make(self, mode)
            p = self.path
            if isinstance(self, tcm.StorageObject) and not os.path.isdir(p + "/attrib"):
                kind = os.path.basename(os.path.dirname(p)).rsplit("_", 1)[0]
                for a, (w, v) in dict(COMMON_ATTRS, **{
                        x: (COMMON_ATTRS[x][0], y) for x, y in KIND_ATTRS[kind].items()}).items():
                    put(os.path.join(p, "attrib", a), v, w)
                os.makedirs(os.path.join(p, "wwn"))
                for a, v in ALUA_DEFAULT.items():
                    put(os.path.join(p, "alua", "default_tg_pt_gp", a), v)
                put(os.path.join(p, "udev_path"), "")
            elif isinstance(self, target.TPG) and not os.path.isdir(p + "/lun"):
                for g in ("lun", "acls", "np", "param", "auth"):
                    os.makedirs(os.path.join(p, g))
                put(os.path.join(p, "attrib", "fabric_prot_type"), 0)
            elif isinstance(self, target.LUN) and not os.path.exists(p + "/alua_tg_pt_gp"):
                put(os.path.join(p, "alua_tg_pt_gp"),
                    "TG Port Alias: default_tg_pt_gp\nTG Port Group ID: 0")

        def fwrite(path, value):
            so, name = os.path.split(path)
            value = str(value).strip()
            if name == "control":
                controls[so] = controls.get(so, "") + "," + value
            elif name == "enable" and "/core/" in path:
                kind = os.path.basename(os.path.dirname(so)).rsplit("_", 1)[0]
                put(os.path.join(so, "info"), control_info(kind, controls.get(so, ""), ""))
                return real_fwrite(path, value)
            elif name == "vpd_unit_serial":
                return put(path, "T10 VPD Unit Serial Number: %s" % value)
            elif name == "alua_tg_pt_gp":
                return put(path, "TG Port Alias: %s\nTG Port Group ID: 0" % value)
            return real_fwrite(path, value)

        node.CFSNode._create_in_cfs_ine = made
        for m in (alua, fabric, node, root, target, tcm):
            if hasattr(m, "fwrite"):
                m.fwrite = fwrite
        # udev's view: the one block device of the fixtures is a disk, not in use.
        tcm.get_blockdev_type = lambda p: 0 if p.endswith("/vdb") else None
        tcm.is_dev_in_use = lambda p: False
        try:
            errors = root.RTSRoot().restore(json.loads(json.dumps(config)))
            return errors, root.RTSRoot().dump()
        finally:
            node.CFSNode._create_in_cfs_ine = make


DERIVED = {"optimal_sectors", "queue_depth", "is_nonrot", "max_unmap_lba_count",
           "max_unmap_block_desc_count", "unmap_granularity", "unmap_granularity_alignment",
           "unmap_zeroes_data", "max_write_same_len"}


def without_derived(v, in_attributes=False):
    if isinstance(v, dict):
        return {k: without_derived(x, k == "attributes") for k, x in v.items()
                if not (in_attributes and k in DERIVED)}
    if isinstance(v, list):
        return [without_derived(x) for x in v]
    return v


def canonical(v):
    """v with every list sorted, for comparing modulo ordering."""
    if isinstance(v, dict):
        return {k: canonical(x) for k, x in v.items()}
    if isinstance(v, list):
        return sorted((canonical(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))
    return v


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        print("1..%d" % len(SCENARIOS))
        try:
            import rtslib_fb  # noqa: F401
        except ImportError:
            for i, s in enumerate(SCENARIOS, 1):
                print("ok %d - %s # SKIP python3-rtslib-fb is not installed" % (i, s))
            return 0
        bad = 0
        for i, s in enumerate(SCENARIOS, 1):
            with open(os.path.join(argv[2], s + ".json")) as f:
                # rtslib lists directories in readdir order, which differs between file systems.
                same = canonical(json.load(f)) == canonical(json.loads(dump(s)))
            bad += not same
            print("%s %d - %s.json is what rtslib_fb dumps" % ("ok" if same else "not ok", i, s))
        return 1 if bad else 0
    if len(argv) == 3 and argv[1] == "--restore":
        # Exit 77: no rtslib_fb to run.  Else 0 when targetcli restores the
        # file without an error and then dumps it again.
        try:
            import rtslib_fb  # noqa: F401
        except ImportError:
            return 77
        with open(argv[2]) as f:
            config = json.load(f)
        errors, after = restore(config)
        # An empty "wwn" makes rtslib generate a unit serial, as it does for a new one.
        unset = {(so["plugin"], so["name"]) for so in config.get("storage_objects", [])
                 if so.get("wwn") == ""}
        for so in after.get("storage_objects", []):
            if (so["plugin"], so["name"]) in unset:
                so["wwn"] = ""
        for e in errors:
            sys.stderr.write("rtslib restore: %s\n" % e)
        same = canonical(without_derived(after)) == canonical(without_derived(config))
        if not same:
            sys.stderr.write("rtslib's dump after restore differs:\n%s\n" %
                             json.dumps(after, sort_keys=True, indent=2))
        return 0 if same and not errors else 1
    if len(argv) == 2:
        for s in SCENARIOS:
            with open(os.path.join(argv[1], s + ".json"), "w") as f:
                f.write(dump(s))
        return 0
    sys.stderr.write("usage: targetcli-dump.py OUTDIR | --check DIR\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

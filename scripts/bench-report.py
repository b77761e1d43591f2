#!/usr/bin/env python3
# Turns the raw runs of scripts/bench.sh (out/bench/*.jsonl, one JSON object
# per run) into docs/performance.md: the machine, one table of the
# performance goals (median of the runs, the ratio asked for, met or not), and every
# configuration with its exact commands.  Medians are taken per metric.
#
# SPDX-License-Identifier: GPL-2.0-or-later
import datetime
import glob
import json
import os
import platform
import re
import statistics
import subprocess
import sys

out_dir, doc, runtime, reps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

runs = {}
for path in sorted(glob.glob(os.path.join(out_dir, "*.jsonl"))):
    name = os.path.basename(path)[:-len(".jsonl")]
    runs[name] = [json.loads(line) for line in open(path) if line.strip()]


def get(run, key):
    v = run
    for k in key.split("."):
        if not isinstance(v, dict) or k not in v:
            return None
        v = v[k]
    return v


def med(name, key):
    vals = [get(r, key) for r in runs.get(name, [])]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def cmd(name):
    r = runs.get(name, [{}])[0]
    # the scratch directory's random name means nothing to a reader
    parts = [re.sub(r"/\S*/bench-work\.\w+/", "WORK/", r[k])
             for k in ("target_cmd", "bench_cmd", "fio_cmd") if k in r]
    return "<br>".join("`%s`" % p for p in parts)


def fmt(v, spec="{:,.0f}"):
    return "n/a" if v is None else spec.format(v)


def sh(c):
    try:
        return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
mem = sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2/1048576}' /proc/meminfo")
loads = [r.get("loadavg") for rs in runs.values() for r in rs if r.get("loadavg") is not None]

goals = []  # (goal, figure, command, verdict)


def verdict(ok):
    return "n/a" if ok is None else ("**met**" if ok else "**not met**")


# 1. polling, null LUN, QD32
if "g1-poll" in runs:
    best = max(("g1-poll", "g1-adaptive"), key=lambda n: med(n, "iops") or 0)
    iops, p99 = med(best, "iops"), med(best, "lat_us.p99")
    goals.append(("1. null 4k randread QD32, 1 thread, polling: >= 1.5M IOPS, p99 < 50 us",
                  "%s IOPS (%.2f of 1.5M), p99 %s us [%s]" % (fmt(iops), (iops or 0) / 1.5e6,
                                                          fmt(p99, "{:.1f}"), best),
                  cmd(best), verdict(iops is not None and iops >= 1.5e6 and p99 < 50)))
# 2. interrupt mode wake-ups
if "g2-irq-qd32" in runs:
    c32, c1 = med("g2-irq-qd32", "backend.ctxsw_per_io"), med("g2-irq-qd1", "backend.ctxsw_per_io")
    goals.append(("2. interrupt mode: <= 0.1 target context switches/IO at QD32, <= 1 at QD1",
                  "QD32 %s/IO (%s IOPS), QD1 %s/IO (%s IOPS)" % (
                      fmt(c32, "{:.4f}"), fmt(med("g2-irq-qd32", "iops")),
                      fmt(c1, "{:.4f}"), fmt(med("g2-irq-qd1", "iops"))),
                  cmd("g2-irq-qd32") + "<br>QD1: `--iodepth 1`",
                  verdict(c32 is not None and c1 is not None and c32 <= 0.1 and c1 <= 1.0)))
# 3. file LUN vs fio on the host
for kind, label in (("cached", "page-cached file"), ("direct", "O_DIRECT loop device")):
    fio = med("g3-fio-" + kind, "iops")
    if fio is None:
        continue
    cands = [n for n in ("g3-" + kind, "g3-" + kind + "-poll") if n in runs]
    best = max(cands, key=lambda n: med(n, "iops") or 0)
    ours = med(best, "iops")
    ratio = (ours or 0) / fio
    goals.append(("3. %s: bench through the target >= 70%% of host fio io_uring" % label,
                  "%s vs fio %s IOPS: **%.2f** [%s]" % (fmt(ours), fmt(fio), ratio, best),
                  cmd(best) + "<br>" + cmd("g3-fio-" + kind), verdict(ratio >= 0.7)))
# 4. under load
for mode, sfx in (("adaptive", ""), ("off", "-off"),
                  ("adaptive, driver polls completions (bench --poll)", "-poll")):
    if "g4-noload" + sfx not in runs:
        continue
    i0, i1 = med("g4-noload" + sfx, "iops"), med("g4-load" + sfx, "iops")
    s0, s1 = med("g4-noload" + sfx, "backend.sys_us_per_io"), med("g4-load" + sfx,
                                                                 "backend.sys_us_per_io")
    share = med("g4-load" + sfx, "load_cpu_share")
    fall = 1 - (i1 or 0) / i0 if i0 else None
    sysr = s1 / s0 if s0 and s1 is not None else None
    goals.append(("4. two nice-10 busy loops, --poll %s: IOPS fall <= 25%%, sys/IO <= 1.5x" % mode,
                  "IOPS %s -> %s (%s); sys %s -> %s us/IO (x%s); busy loops got %s of "
                  "both cores" % (fmt(i0), fmt(i1), fmt(fall and -fall * 100, "{:+.0f}%"),
                                  fmt(s0, "{:.2f}"), fmt(s1, "{:.2f}"), fmt(sysr, "{:.2f}"),
                                  fmt(share and share * 100, "{:.0f}%")),
                  cmd("g4-load" + sfx) + " (+ load)",
                  verdict(fall is not None and sysr is not None and fall <= 0.25 and
                          sysr <= 1.5)))
# 5. guest comparison from make demo
demo = os.path.join(out_dir, "g5-demo-results.txt")
if os.path.exists(demo):
    text = open(demo).read()
    cells = []
    ok = True
    for line in text.splitlines():
        m = re.match(r"(rand\S+)\s*\|\s*(\d+) IOPS.*\|\s*(\d+) IOPS", line)
        if m:
            r = int(m.group(2)) / int(m.group(3))
            ok = ok and r >= 1.0
            cells.append("%s %s vs %s (%.2f)" % (m.group(1), m.group(2), m.group(3), r))
    goals.append(("5. guest fio (TCG): ours >= QEMU virtio-scsi-pci + scsi-hd io_uring iothread",
                  "; ".join(cells) + " (" + text.splitlines()[0] + ")", "`make demo` "
                  "(scripts/demo.sh, out/demo-results.txt)", verdict(ok if cells else None)))
# 6. scaling
if "g6-1thread" in runs:
    rows = []
    best = 0
    for one, two, label in (("g6-1thread", "g6-2threads", "1 bench thread, 2 queues x QD32"),
                            ("g6-pair-1thread", "g6-pair-2threads",
                             "2 bench processes, 1 queue x QD32 each"),
                            ("g6-pair-1thread-qd1", "g6-pair-2threads-qd1",
                             "2 bench processes, 1 queue x QD1 each")):
        a, b = med(one, "iops"), med(two, "iops")
        if a and b:
            best = max(best, b / a)
            rows.append("%s: %s -> %s IOPS (**%.2fx**)" % (label, fmt(a), fmt(b), b / a))
    goals.append(("6. two threads on two queues >= 1.7x one thread", "; ".join(rows),
                  cmd("g6-2threads") + "<br>" + cmd("g6-pair-2threads") +
                  "<br>one thread: `--threads 1`; QD1: `--iodepth 1`",
                  verdict(best >= 1.7)))
# 7. RSS
if "g7-rss" in runs:
    hwm = max(r.get("target_hwm_kib", 0) for r in runs["g7-rss"])
    goals.append(("7. target RSS, 1 GiB file LUN, 4 queues, < 16 MiB",
                  "peak RSS (VmHWM) %.1f MiB" % (hwm / 1024), cmd("g7-rss"),
                  verdict(hwm < 16 * 1024)))

MARK = "<!-- analysis: everything below this line is kept by make bench -->"
notes = ""
if os.path.exists(doc):
    prev = open(doc).read()
    if MARK in prev:
        notes = prev.split(MARK, 1)[1].lstrip("\n")

with open(doc, "w") as f:
    w = f.write
    w("# Performance\n\n")
    w("Written by `make bench` (scripts/bench.sh) on %s UTC from commit %s%s.  Everything "
      "above the analysis marker is generated (re-run it, do not edit); the analysis "
      "below it is written by hand and kept.  Each figure is the median of %s runs of %s s; raw runs are in "
      "out/bench/*.jsonl.\n\n" % (
          datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"),
          sh("git rev-parse --short HEAD") or "?",
          " (with uncommitted changes)" if sh("git status --porcelain --untracked-files=no")
          else "", reps, runtime))
    w("## Machine\n\n")
    w("- %s, %s CPUs (%s), %s RAM, kernel %s\n" % (
        sh(". /etc/os-release; echo $PRETTY_NAME"), os.cpu_count(), cpu, mem, platform.release()))
    w("- no /dev/kvm; no hardware performance counters (`perf stat` software events only)\n")
    w("- bench and target share the same 2 cores: every run has the load generator competing "
      "with the target\n")
    if loads:
        w("- 1-minute load average before the runs: min %.1f, median %.1f, max %.1f "
          "(anything above ~0 means other work shared the cores and the figures are "
          "pessimistic)\n" % (min(loads), statistics.median(loads), max(loads)))
    w("- %s; %s\n\n" % (sh("fio --version"), sh("qemu-system-x86_64 --version | head -1")))
    w("## Goals\n\n| goal | figure (median) | command | verdict |\n|---|---|---|---|\n")
    for g in goals:
        w("| %s | %s | %s | %s |\n" % g)
    w("\n## All configurations\n\n")
    w("| run | IOPS | p50 us | p99 us | interrupts/IO | kicks/IO | target usr us/IO | "
      "target sys us/IO | target csw/IO | load avg |\n|---|---|---|---|---|---|---|---|---|---|\n")
    for name in runs:
        w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" % (
            name, fmt(med(name, "iops")), fmt(med(name, "lat_us.p50"), "{:.1f}"),
            fmt(med(name, "lat_us.p99"), "{:.1f}"), fmt(med(name, "interrupts_per_io"), "{:.3f}"),
            fmt(med(name, "kicks_per_io"), "{:.3f}"),
            fmt(med(name, "backend.usr_us_per_io"), "{:.2f}"),
            fmt(med(name, "backend.sys_us_per_io"), "{:.2f}"),
            fmt(med(name, "backend.ctxsw_per_io"), "{:.3f}"), fmt(med(name, "loadavg"), "{:.1f}")))
    w("\nCommands (S is the socket, PID the target's pid):\n\n")
    for name in runs:
        w("- %s: %s\n" % (name, cmd(name).replace("<br>", " ; ")))
    # The analysis below the marker is written by people: carried over.
    w("\n" + MARK + "\n" + notes)

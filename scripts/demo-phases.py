#!/usr/bin/env python3
# Host-side CPU accounting for `make demo`: follows the guest's console log
# while the guest runs and, at each `DEMO-PHASE: begin|end dev=… job=…
# round=…` line tests/guest/demo-fio.sh prints around a fio job, writes one
# line with the CPU time (microseconds, user + system) used so far and the
# voluntary context switches (each one a sleep, so a wake-up later) of each
# target process, of QEMU's iothread, of QEMU's main-loop thread and of the
# whole QEMU process. The guest's figures say what each device gives; these
# say what it costs the host, and under TCG the host's two cores are shared
# by the guest's vCPUs and the devices, so a device that spins takes CPU
# from the guest it serves. It stops when the file DONE exists (the demo
# creates it once QEMU has exited) and the log has been read to its end.
#
# Usage: demo-phases.py LOG QEMU_PIDFILE DONE OUT NAME=PID...
#   NAME=PID   a target process to account (e.g. vhost-user-scsi=1234)
#
# SPDX-License-Identifier: GPL-2.0-or-later
import os
import sys
import time

TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


def cpu_us(stat_path):
    """utime + stime of a /proc stat file in microseconds, None if gone."""
    try:
        with open(stat_path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command name: state is field 3, utime 14, stime 15.
    return round((int(fields[11]) + int(fields[12])) * TICK_US)


def switches(task_dirs):
    """Voluntary context switches (sleeps, so wake-ups) of the tasks, None if gone."""
    n = 0
    try:
        for d in task_dirs:
            with open(d + "/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        n += int(line.split()[1])
    except OSError:
        return None
    return n


def tasks(pid):
    try:
        return ["/proc/%d/task/%s" % (pid, t) for t in os.listdir("/proc/%d/task" % pid)]
    except OSError:
        return []


def thread_named(pid, name):
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                    if f.read().strip() == name:
                        return int(tid)
            except OSError:
                continue
    except OSError:
        pass
    return None


def qemu_pid(pidfile):
    try:
        with open(pidfile) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def snapshot(qpid, targets):
    """cpu_NAME=us and wake_NAME=voluntary switches for each thing accounted."""
    things = [(name, "/proc/%d" % pid, tasks(pid)) for name, pid in targets]
    if qpid:
        io = thread_named(qpid, "IO io0")
        if io:
            d = "/proc/%d/task/%d" % (qpid, io)
            things.append(("iothread", d, [d]))
        d = "/proc/%d/task/%d" % (qpid, qpid)
        things.append(("qemu_main", d, [d]))
        things.append(("qemu", "/proc/%d" % qpid, tasks(qpid)))
    return " ".join("cpu_%s=%s wake_%s=%s" % (name, cpu_us(d + "/stat"), name, switches(t))
                    for name, d, t in things)


def main():
    if len(sys.argv) < 5:
        sys.exit("usage: demo-phases.py LOG QEMU_PIDFILE DONE OUT NAME=PID...")
    log, pidfile, done, out = sys.argv[1:5]
    targets = []
    for arg in sys.argv[5:]:
        name, _, pid = arg.partition("=")
        targets.append((name, int(pid)))
    qpid = None
    buf = b""
    f = None
    with open(out, "w") as o:
        while True:
            # Looked at before reading: a log read empty after DONE appeared is complete.
            finished = os.path.exists(done)
            if f is None:
                if not os.path.exists(log):
                    if finished:
                        return
                    time.sleep(0.01)
                    continue
                f = open(log, "rb")
            chunk = f.read()
            if not chunk:
                if finished:
                    f.close()
                    return
                # A 10 ms poll: a phase lasts seconds, so the error is small.
                time.sleep(0.01)
                continue
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip("\r")
                if line.startswith("DEMO-PHASE: "):
                    # QEMU writes its pid file before the guest boots.
                    if qpid is None:
                        qpid = qemu_pid(pidfile)
                    o.write("%s %s\n" % (line[len("DEMO-PHASE: "):], snapshot(qpid, targets)))
                    o.flush()


if __name__ == "__main__":
    main()

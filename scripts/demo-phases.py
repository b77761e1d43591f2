#!/usr/bin/env python3
# Host-side CPU accounting for `make demo`: follows the guest's console log
# while the guest runs and, at each `DEMO-PHASE: begin|end dev=… job=…
# round=…` line tests/guest/demo-fio.sh prints around a fio job, writes one
# line with the CPU time (microseconds, user + system) used so far and the
# voluntary context switches (each one a sleep, so a wake-up later) of each
# target process, of QEMU's iothread and of QEMU's main-loop thread (each
# with its io_uring workers) and of the whole QEMU process, and the
# switches of the io_uring workers alone (wrk_NAME). The guest's figures say what each device gives; these
# say what it costs the host, and under TCG the host's two cores are shared
# by the guest's vCPUs and the devices, so a device that spins takes CPU
# from the guest it serves. A target given with its control socket also
# has its I/O threads' wake-ups by source read from the `stats` request
# (kick_NAME: a driver's kick woke a thread, uring_NAME: a backend's
# completion did), which the switches alone cannot tell apart. It stops when
# the file DONE exists (the demo creates it once QEMU has exited) and the
# log has been read to its end.
#
# Usage: demo-phases.py LOG QEMU_PIDFILE DONE OUT NAME=PID[@CONTROL]...
#   NAME=PID   a target process to account (e.g. vhost-user-scsi=1234)
#   @CONTROL   its control socket (vhost-scsi-target --control)
#
# SPDX-License-Identifier: GPL-2.0-or-later
import json
import os
import socket
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


def comm(task_dir):
    """A task's name, None if it has gone."""
    try:
        with open(task_dir + "/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def thread_named(pid, name):
    for d in tasks(pid):
        if comm(d) == name:
            return int(os.path.basename(d))
    return None


def thread_wakeups(control):
    """(kick, uring) wake-ups summed over a target's I/O threads, (None, None) if unanswered."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(control)
            s.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "stats"}\n')
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        threads = json.loads(buf)["result"]["threads"]
        return (sum(t["wakeups_kick"] for t in threads),
                sum(t["wakeups_uring"] for t in threads))
    except (OSError, ValueError, KeyError, TypeError):
        return None, None


def qemu_pid(pidfile):
    try:
        with open(pidfile) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def with_workers(pid, tid):
    """A thread's task dir and those of its io_uring workers (iou-wrk-TID), which
    run the writes it submits that cannot go without blocking (an allocating
    write to a sparse file): its work, wherever the kernel runs it."""
    return ["/proc/%d/task/%d" % (pid, tid)] + [d for d in tasks(pid)
                                                if comm(d) == "iou-wrk-%d" % tid]


def workers(task_dirs):
    """The io_uring workers among the tasks."""
    return [d for d in task_dirs if (comm(d) or "").startswith("iou-wrk-")]


def cpu_sum(stat_dirs):
    total = 0
    for d in stat_dirs:
        us = cpu_us(d + "/stat")
        if us is None:
            return None
        total += us
    return total


def snapshot(qpid, targets):
    """cpu_NAME=us and wake_NAME=voluntary switches for each thing accounted.

    A target process counts whole (its io_uring workers are its threads);
    QEMU's iothread and main loop count with their own workers, so that the
    two devices' columns hold the same kinds of work."""
    things = [(name, ["/proc/%d" % pid], tasks(pid)) for name, pid, _ in targets]
    if qpid:
        io = thread_named(qpid, "IO io0")
        if io:
            dirs = with_workers(qpid, io)
            things.append(("iothread", dirs, dirs))
        dirs = with_workers(qpid, qpid)
        things.append(("qemu_main", dirs, dirs))
        things.append(("qemu", ["/proc/%d" % qpid], tasks(qpid)))
    words = ["cpu_%s=%s wake_%s=%s wrk_%s=%s" %
             (name, cpu_sum(c), name, switches(t), name, switches(workers(t)))
             for name, c, t in things]
    for name, _, control in targets:
        if control:
            kick, uring = thread_wakeups(control)
            words.append("kick_%s=%s uring_%s=%s" % (name, kick, name, uring))
    return " ".join(words)


def main():
    if len(sys.argv) < 5:
        sys.exit("usage: demo-phases.py LOG QEMU_PIDFILE DONE OUT NAME=PID[@CONTROL]...")
    log, pidfile, done, out = sys.argv[1:5]
    targets = []
    for arg in sys.argv[5:]:
        name, _, rest = arg.partition("=")
        pid, _, control = rest.partition("@")
        targets.append((name, int(pid), control or None))
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

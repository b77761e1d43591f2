#!/usr/bin/env python3
"""A small QMP client for the guest tests and benchmarks: connects to a QEMU
monitor's unix socket (`-qmp unix:PATH,server=on,wait=off`, see run-qemu.sh
--qmp), negotiates capabilities, executes commands and waits for events or
for a migration to end, every wait bounded.  Usable as a module (class QMP)
or from the shell, where each call is one connection (QEMU serves one QMP
client at a time, so a call waits for a previous one to close):

Usage: tests/guest/qmp.py SOCKET [--timeout S] ACTION [ARGS]
  execute CMD [JSON-ARGS]    run CMD, print its "return" as JSON; exit 1 on
                             an error reply (printed on stderr)
  wait-event NAME            wait for event NAME, print its "data" (events
                             sent before the connection are not seen)
  wait-migration             poll query-migrate until the status is
                             completed, failed or cancelled; print the last
                             reply; exit 0 only for completed
  wait-status STATUS         poll query-status until the run state is STATUS
  wait-sync N CMD [JSON-ARGS]
                             poll query-migrate until RAM's dirty-sync-count
                             is N or more (the bitmap sync that ends a
                             complete pass over RAM), then run CMD in the
                             same connection, with no wait for a new one;
                             print query-migrate's reply after CMD; exit 1
                             unless the migration is still active then
  free-port                  (no SOCKET: pass -) print a free TCP port on
                             127.0.0.1, for -incoming tcp:127.0.0.1:PORT
--timeout bounds the whole call, connecting included (default 30 s): the
socket may not exist yet when QEMU has only just been started.

SPDX-License-Identifier: GPL-2.0-or-later
"""
import json
import socket
import sys
import time


class QMPError(Exception):
    """An error reply, a closed connection or a wait that ran out of time."""


class QMP:
    """One QMP connection; every call takes a deadline (time.monotonic())."""

    def __init__(self, path, deadline):
        self.deadline = deadline
        self.events = []
        self.buf = b""
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError) as e:
                self.sock.close()
                if time.monotonic() >= deadline:
                    raise QMPError(f"{path}: cannot connect: {e}") from e
                time.sleep(0.05)
        greeting = self._read()
        if "QMP" not in greeting:
            raise QMPError(f"{path}: not a QMP greeting: {greeting}")
        self.execute("qmp_capabilities")

    def close(self):
        self.sock.close()

    def _read(self):
        """The next message (reply or event), within the deadline."""
        while b"\n" not in self.buf:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise QMPError("timed out waiting for QEMU")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout as e:
                raise QMPError("timed out waiting for QEMU") from e
            if not chunk:
                raise QMPError("QEMU closed the monitor connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def execute(self, cmd, args=None):
        """Runs CMD and returns its "return" value; events met are kept."""
        msg = {"execute": cmd}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._read()
            if "event" in reply:
                self.events.append(reply)
            elif "error" in reply:
                raise QMPError(f"{cmd}: {reply['error'].get('desc', reply['error'])}")
            elif "return" in reply:
                return reply["return"]

    def wait_event(self, name):
        """Returns the first event NAME, kept or new; QMPError at the deadline."""
        while True:
            for i, ev in enumerate(self.events):
                if ev["event"] == name:
                    return self.events.pop(i)
            self.events.append(self._read())

    def poll(self, cmd, done, interval=0.05):
        """Runs CMD until done(reply) holds; returns that reply."""
        while True:
            reply = self.execute(cmd)
            if done(reply):
                return reply
            if time.monotonic() + interval >= self.deadline:
                raise QMPError(f"timed out polling {cmd}: last reply {json.dumps(reply)}")
            time.sleep(interval)

    def wait_sync(self, count):
        """query-migrate's reply once RAM's dirty-sync-count reached COUNT;
        QMPError if the migration ended first."""
        reply = self.poll("query-migrate",
                          lambda r: r.get("status") not in ("setup", "active") or
                          r.get("ram", {}).get("dirty-sync-count", 0) >= count,
                          interval=0.01)
        if reply.get("status") != "active":
            raise QMPError(f"migration {reply.get('status')} before dirty sync {count}")
        return reply

    def wait_migration(self):
        """query-migrate's reply once the migration has ended."""
        return self.poll("query-migrate",
                         lambda r: r.get("status") in ("completed", "failed", "cancelled"))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    args = argv[1:]
    if len(args) < 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    path = args.pop(0)
    timeout = 30.0
    if args[0] == "--timeout":
        timeout = float(args[1])
        args = args[2:]
    action, rest = args[0], args[1:]
    if action == "free-port":
        print(free_port())
        return 0
    try:
        qmp = QMP(path, time.monotonic() + timeout)
        if action == "execute":
            ret = qmp.execute(rest[0], json.loads(rest[1]) if len(rest) > 1 else None)
            print(json.dumps(ret))
        elif action == "wait-event":
            print(json.dumps(qmp.wait_event(rest[0]).get("data", {})))
        elif action == "wait-migration":
            reply = qmp.wait_migration()
            print(json.dumps(reply))
            return 0 if reply.get("status") == "completed" else 1
        elif action == "wait-sync":
            qmp.wait_sync(int(rest[0]))
            qmp.execute(rest[1], json.loads(rest[2]) if len(rest) > 2 else None)
            reply = qmp.execute("query-migrate")
            print(json.dumps(reply))
            if reply.get("status") != "active":
                print(f"qmp.py: {path}: migration {reply.get('status')} after {rest[1]}",
                      file=sys.stderr)
                return 1
        elif action == "wait-status":
            qmp.poll("query-status", lambda r: r.get("status") == rest[0])
        else:
            print(f"qmp.py: unknown action {action}", file=sys.stderr)
            return 2
        qmp.close()
    except (QMPError, OSError, json.JSONDecodeError) as e:
        print(f"qmp.py: {path}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

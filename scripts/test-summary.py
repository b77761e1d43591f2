#!/usr/bin/env python3
# The closing summary of `make check` (scripts/check.sh): it reads the
# testlog.json that `meson test` left in each build directory and counts test
# cases, not test binaries, by parsing the TAP each test printed (meson keeps
# a test's stdout in the log; which tests speak TAP, and which suites each is
# in, comes from the build directory's meson-info/intro-tests.json).  Every
# skipped case is listed with its reason and every failed case by name.  A
# broken environment must not look green, so an expected suite that did not
# run (no testlog, a suite with no tests defined, as when QEMU is missing, or
# a test of the suite absent from the log), a TAP stream that bails out, has
# no plan or runs a different number of cases than planned, and a binary
# that exits with an error although its cases passed all count as failures.
# A build that check.sh only compiles (the release builds under gcc and
# clang) is one case each, given as --built=BUILD_DIR:STATUS with the exit
# status of its meson setup and ninja: it passes if that is 0.
# The last line is always "N passed, N failed, N skipped"; the exit status is
# 1 if anything failed or nothing passed.
#
#   test-summary.py [--built=BUILD_DIR:STATUS ...] BUILD_DIR:SUITE[,SUITE...] ...
#
# SPDX-License-Identifier: GPL-2.0-or-later
import json
import os
import re
import sys

TEST_LINE = re.compile(r'^(not ok|ok)\b\s*(\d+)?\s*(?:-\s*)?([^#]*?)\s*(?:#\s*(\S+)\s*(.*?))?\s*$')
PLAN_LINE = re.compile(r'^1\.\.(\d+)\s*(?:#\s*(?:skip\S*)\s*(.*?))?\s*$', re.IGNORECASE)
BAIL_LINE = re.compile(r'^Bail out!\s*(.*)$')
GOOD_RESULTS = ('OK', 'EXPECTEDFAIL', 'SKIP')


class Summary:
    """Counts and the lines naming skipped and failed cases."""

    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.skips = []
        self.failures = []

    def passes(self, n=1):
        self.passed += n

    def skip(self, where, reason):
        self.skipped += 1
        self.skips.append(f'SKIPPED: {where}: {reason or "(no reason given)"}')

    def fail(self, where, why):
        self.failed += 1
        self.failures.append(f'FAILED: {where} ({why})')


def parse_tap(stdout, where, summary):
    """Counts the cases of one TAP stream; returns False if the stream itself
    is broken (bail-out, missing or unmet plan), which was counted already."""
    plan = None
    ran = 0
    for line in stdout.splitlines():
        m = BAIL_LINE.match(line)
        if m:
            summary.fail(where, f'bailed out: {m.group(1) or "no reason"}')
            return False
        m = PLAN_LINE.match(line)
        if m:
            plan = int(m.group(1))
            if plan == 0:
                summary.skip(where, m.group(2) or 'plan 1..0')
            continue
        m = TEST_LINE.match(line)
        if not m:
            continue
        ran += 1
        good = m.group(1) == 'ok'
        name = m.group(3) or f'case {m.group(2) or ran}'
        directive = (m.group(4) or '').upper()
        reason = m.group(5) or ''
        case = f'{where} {name}'
        if directive.startswith('SKIP'):
            summary.skip(case, reason)
        elif directive.startswith('TODO'):
            if good:
                summary.fail(case, f'passed unexpectedly (TODO {reason})'.rstrip())
            else:
                summary.skip(case, f'TODO {reason}'.rstrip())
        elif good:
            summary.passes()
        else:
            summary.fail(case, 'not ok')
    if plan is None:
        summary.fail(where, f'no TAP plan after {ran} cases')
        return False
    if plan != ran:
        summary.fail(where, f'planned {plan} cases, ran {ran}')
        return False
    return True


def bare_name(logged):
    # meson logs "project:suite / name" when several suites ran at once.
    return logged.rsplit(' / ', 1)[-1]


def suites_of(test):
    return {s.split(':')[-1] for s in test.get('suite', [])}


def summarise_build(build_dir, expected_suites, summary):
    tag = f'[{os.path.basename(os.path.normpath(build_dir))}]'
    intro_path = os.path.join(build_dir, 'meson-info', 'intro-tests.json')
    log_path = os.path.join(build_dir, 'meson-logs', 'testlog.json')
    try:
        with open(intro_path) as f:
            defined = {t['name']: t for t in json.load(f)}
    except (OSError, ValueError) as e:
        summary.fail(tag, f'cannot read {intro_path}: {e}')
        defined = {}
    try:
        with open(log_path) as f:
            logged = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        summary.fail(f'{tag} suites {",".join(expected_suites)}', f'did not run: {e.strerror}: {log_path}')
        return
    except ValueError as e:
        summary.fail(tag, f'unreadable {log_path}: {e}')
        return

    ran = {bare_name(r['name']) for r in logged}
    for suite in expected_suites:
        members = [n for n, t in defined.items() if suite in suites_of(t)]
        if defined and not members:
            summary.fail(f'{tag} suite {suite}', 'no tests defined (a missing program such as QEMU?)')
        for name in sorted(set(members) - ran):
            summary.fail(f'{tag} {name}', f'suite {suite} did not run it')

    for r in logged:
        name = bare_name(r['name'])
        where = f'{tag} {name}'
        result = r.get('result')
        protocol = defined.get(name, {}).get('protocol')
        stdout = r.get('stdout') or ''
        if protocol is None:
            protocol = 'tap' if re.search(r'^(1\.\.\d|ok\b|not ok\b)', stdout, re.M) else 'exitcode'
        if protocol != 'tap':
            if result in ('OK', 'EXPECTEDFAIL'):
                summary.passes()
            elif result == 'SKIP':
                summary.skip(where, 'exit status 77, the test gave no reason')
            else:
                summary.fail(where, result)
            continue
        failed_before = summary.failed
        if (parse_tap(stdout, where, summary) and summary.failed == failed_before
                and result not in GOOD_RESULTS):
            # Every case passed but the binary did not (a sanitizer report at
            # exit, a crash after the last case, a time-out).
            summary.fail(where, f'{result}, exit status {r.get("returncode")}')


def summarise_built(arg, summary):
    """One build-only case: BUILD_DIR:STATUS, STATUS the build's exit status."""
    build_dir, _, status = arg.rpartition(':')
    where = f'[{os.path.basename(os.path.normpath(build_dir))}] build'
    if status == '0':
        summary.passes()
    else:
        summary.fail(where, f'exit status {status or "missing"}, see {build_dir}/build.log')


def main(argv):
    if not argv:
        print('usage: test-summary.py [--built=BUILD_DIR:STATUS ...] BUILD_DIR:SUITE[,SUITE...] ...',
              file=sys.stderr)
        return 2
    summary = Summary()
    for arg in argv:
        if arg.startswith('--built='):
            summarise_built(arg[len('--built='):], summary)
            continue
        build_dir, _, suites = arg.partition(':')
        summarise_build(build_dir, [s for s in suites.split(',') if s], summary)
    for line in summary.skips + summary.failures:
        print(line)
    print(f'{summary.passed} passed, {summary.failed} failed, {summary.skipped} skipped')
    return 1 if summary.failed or summary.passed == 0 else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

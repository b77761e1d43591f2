#!/usr/bin/env python3
# Specification of scripts/test-summary.py, the closing count of `make
# check`: each case writes a fixture build directory (a testlog.json as
# `meson test` writes it and the meson-info/intro-tests.json that says which
# tests speak TAP and which suites they are in), runs the script on it and
# checks the counts, the listed skips and failures and the exit status.
# Prints TAP itself (Python 3 standard library only).
#
# SPDX-License-Identifier: GPL-2.0-or-later
import json
import os
import subprocess
import sys
import tempfile
import traceback

SCRIPT = os.environ.get('TEST_SUMMARY') or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts', 'test-summary.py')

GTEST_PASS = 'ok 1 /a/one\nok 2 /a/two\nok 3 /a/three\n1..3\n'


def build_dir(root, name, tests, logged=None):
    """tests: [(name, suites, protocol)]; logged: [(name, result, stdout)],
    or None for a build directory where no test ran (no testlog)."""
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, 'meson-info'))
    with open(os.path.join(d, 'meson-info', 'intro-tests.json'), 'w') as f:
        json.dump([{'name': n, 'suite': ['vhost-scsi:' + s for s in suites], 'protocol': p}
                   for n, suites, p in tests], f)
    if logged is not None:
        os.makedirs(os.path.join(d, 'meson-logs'))
        with open(os.path.join(d, 'meson-logs', 'testlog.json'), 'w') as f:
            for n, result, stdout in logged:
                rc = {'OK': 0, 'SKIP': 77}.get(result, 1)
                f.write(json.dumps({'name': 'vhost-scsi:unit / ' + n, 'stdout': stdout,
                                    'result': result, 'returncode': rc}) + '\n')
    return d


def summary(*args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    lines = p.stdout.splitlines()
    return p.returncode, lines


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def test_counts_cases_not_binaries(root):
    d = build_dir(root, 'build', [('a-test', ['unit'], 'tap'), ('b-test', ['unit'], 'tap')],
                  [('a-test', 'OK', GTEST_PASS), ('b-test', 'OK', 'ok 1 - b\n1..1\n')])
    rc, lines = summary(d + ':unit')
    check(lines == ['4 passed, 0 failed, 0 skipped'], lines)
    check(rc == 0, rc)


def test_failed_case_is_named(root):
    d = build_dir(root, 'build-asan', [('a-test', ['unit'], 'tap')],
                  [('a-test', 'FAIL', 'ok 1 /a/one\nnot ok 2 /a/two\n1..2\n')])
    rc, lines = summary(d + ':unit')
    check('FAILED: [build-asan] a-test /a/two (not ok)' in lines, lines)
    check(lines[-1] == '1 passed, 1 failed, 0 skipped', lines)
    check(rc == 1, rc)


def test_skipped_case_is_listed_with_its_reason(root):
    d = build_dir(root, 'build-asan', [('q', ['qtest'], 'tap')],
                  [('q', 'SKIP', 'ok 1 /qtest/x/restart # SKIP needs QEMU >= 8.2\n1..1\n')])
    rc, lines = summary(d + ':qtest')
    check(lines == ['SKIPPED: [build-asan] q /qtest/x/restart: needs QEMU >= 8.2',
                    '0 passed, 0 failed, 1 skipped'], lines)
    check(rc == 1, 'nothing passed, so the run must not look green')


def test_shell_style_skip_and_skip_all_plan(root):
    d = build_dir(root, 'build', [('g', ['guest'], 'tap'), ('i', ['guest'], 'tap')],
                  [('g', 'OK', 'ok 1 - boots\nok 2 - reconnect # SKIP no marker\n1..2\n'),
                   ('i', 'SKIP', '1..0 # SKIP needs tgtd\n')])
    rc, lines = summary(d + ':guest')
    check('SKIPPED: [build] g reconnect: no marker' in lines, lines)
    check('SKIPPED: [build] i: needs tgtd' in lines, lines)
    check(lines[-1] == '1 passed, 0 failed, 2 skipped', lines)
    check(rc == 0, rc)


def test_todo_is_not_a_pass(root):
    d = build_dir(root, 'build', [('t', ['unit'], 'tap')],
                  [('t', 'OK', 'ok 1 /a\nnot ok 2 /b # TODO later\n1..2\n')])
    rc, lines = summary(d + ':unit')
    check('SKIPPED: [build] t /b: TODO later' in lines, lines)
    check(lines[-1] == '1 passed, 0 failed, 1 skipped', lines)


def test_bail_out_fails_the_binary(root):
    d = build_dir(root, 'build', [('t', ['unit'], 'tap')],
                  [('t', 'ERROR', 'ok 1 /a\nBail out! daemon did not start\n')])
    rc, lines = summary(d + ':unit')
    check('FAILED: [build] t (bailed out: daemon did not start)' in lines, lines)
    check(lines[-1] == '1 passed, 1 failed, 0 skipped', lines)
    check(rc == 1, rc)


def test_missing_plan_fails_the_binary(root):
    d = build_dir(root, 'build', [('t', ['unit'], 'tap')],
                  [('t', 'ERROR', 'ok 1 /a\nok 2 /b\n')])
    rc, lines = summary(d + ':unit')
    check('FAILED: [build] t (no TAP plan after 2 cases)' in lines, lines)
    check(lines[-1] == '2 passed, 1 failed, 0 skipped', lines)
    check(rc == 1, rc)


def test_short_plan_fails_the_binary(root):
    d = build_dir(root, 'build', [('t', ['unit'], 'tap')],
                  [('t', 'OK', '1..3\nok 1 /a\n')])
    rc, lines = summary(d + ':unit')
    check('FAILED: [build] t (planned 3 cases, ran 1)' in lines, lines)
    check(rc == 1, rc)


def test_binary_failing_after_its_cases_passed(root):
    d = build_dir(root, 'build-asan', [('t', ['unit'], 'tap')],
                  [('t', 'ERROR', GTEST_PASS)])
    rc, lines = summary(d + ':unit')
    check('FAILED: [build-asan] t (ERROR, exit status 1)' in lines, lines)
    check(lines[-1] == '3 passed, 1 failed, 0 skipped', lines)


def test_exitcode_test_counts_once(root):
    d = build_dir(root, 'build-fuzz', [('f-short', ['fuzz'], 'exitcode'),
                                       ('g-short', ['fuzz'], 'exitcode')],
                  [('f-short', 'OK', 'INFO: libFuzzer noise\nok 1 looks like TAP\n'),
                   ('g-short', 'SKIP', '')])
    rc, lines = summary(d + ':fuzz')
    check('SKIPPED: [build-fuzz] g-short: exit status 77, the test gave no reason' in lines, lines)
    check(lines[-1] == '1 passed, 0 failed, 1 skipped', lines)


def test_missing_testlog_fails(root):
    ok = build_dir(root, 'build', [('t', ['unit'], 'tap')], [('t', 'OK', GTEST_PASS)])
    none = build_dir(root, 'build-fuzz', [('f', ['fuzz'], 'exitcode')])
    rc, lines = summary(ok + ':unit', none + ':fuzz')
    check(any(l.startswith('FAILED: [build-fuzz] suites fuzz (did not run') for l in lines), lines)
    check(lines[-1] == '3 passed, 1 failed, 0 skipped', lines)
    check(rc == 1, rc)


def test_suite_without_tests_fails(root):
    # Configured without QEMU: meson defines no qtest tests at all.
    d = build_dir(root, 'build-asan', [('t', ['unit'], 'tap')], [('t', 'OK', GTEST_PASS)])
    rc, lines = summary(d + ':unit,qtest')
    check(any(l.startswith('FAILED: [build-asan] suite qtest (no tests defined') for l in lines), lines)
    check(rc == 1, rc)


def test_expected_test_absent_from_log_fails(root):
    d = build_dir(root, 'build-asan', [('t', ['unit'], 'tap'), ('u', ['unit'], 'tap')],
                  [('t', 'OK', GTEST_PASS)])
    rc, lines = summary(d + ':unit')
    check('FAILED: [build-asan] u (suite unit did not run it)' in lines, lines)
    check(rc == 1, rc)


def test_build_only_case_counts_once(root):
    d = build_dir(root, 'build-asan', [('t', ['unit'], 'tap')], [('t', 'OK', GTEST_PASS)])
    rc, lines = summary('--built=build-release-gcc:0', d + ':unit')
    check(lines == ['4 passed, 0 failed, 0 skipped'], lines)
    check(rc == 0, rc)


def test_failed_build_is_named_and_fails(root):
    d = build_dir(root, 'build-asan', [('t', ['unit'], 'tap')], [('t', 'OK', GTEST_PASS)])
    rc, lines = summary('--built=build-release-gcc:0', '--built=build-release-clang:1', d + ':unit')
    check('FAILED: [build-release-clang] build (exit status 1, see '
          'build-release-clang/build.log)' in lines, lines)
    check(lines[-1] == '4 passed, 1 failed, 0 skipped', lines)
    check(rc == 1, rc)


def main():
    cases = [(n, f) for n, f in globals().items() if n.startswith('test_')]
    failed = 0
    for i, (name, fn) in enumerate(cases, 1):
        with tempfile.TemporaryDirectory() as root:
            try:
                fn(root)
                print(f'ok {i} {name}')
            except Exception:
                failed += 1
                print(f'not ok {i} {name}')
                for line in traceback.format_exc().splitlines():
                    print('# ' + line)
    print(f'1..{len(cases)}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())

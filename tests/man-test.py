#!/usr/bin/env python3
# The man pages (docs/man/*.scd) against the programs they describe: every
# option a program's --help names is in its page and every option the page
# names is in --help (the EXAMPLES section, which runs other programs too,
# aside); every vhost-scsi-ctl command and subcommand of `lio --help` and
# `target --help` has its entry in the page, and every entry of the page is
# a command of --help; every LUN SPEC kind and option the grammar accepts
# (the tables of hw/block/lun-spec.c) is in vhost-scsi-target(8)'s LUN
# SPEC section; the roff meson built from each page is a man page of the
# right name and section that groff formats without a warning.  TAP.
#
# Environment (tests/meson.build): VHOST_SCSI_TARGET, VHOST_SCSI_CTL,
# VHOST_SCSI_BENCH (the programs), MAN_SRC (docs/man), MAN_BUILD (the built
# roff), LUN_SPEC_C (hw/block/lun-spec.c).
#
# SPDX-License-Identifier: GPL-2.0-or-later
import os
import re
import shutil
import subprocess
import sys

LONG = re.compile(r'(?<![\w-])(--[a-z][a-z0-9-]*)')
SHORT = re.compile(r'(?<![\w-])(-[a-zA-Z])(?![\w-])')

results = []


def case(name, problems):
    """One TAP case: passes when problems (a list of strings) is empty."""
    results.append((name, problems))


def help_of(*argv):
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f'{" ".join(argv)}: exit {p.returncode}: {p.stderr}')
    return p.stdout


def options(text):
    return set(LONG.findall(text)) | set(SHORT.findall(text))


def sections(scd):
    """{SECTION NAME: text} of an scdoc page."""
    out, name = {}, None
    for line in scd.splitlines():
        m = re.match(r'^# (.+)$', line)
        if m:
            name = m.group(1).strip()
            out[name] = ''
        elif name:
            out[name] += line + '\n'
    return out


def page(name):
    with open(os.path.join(os.environ['MAN_SRC'], name + '.scd')) as f:
        return f.read()


def page_options(scd):
    return options(''.join(t for s, t in sections(scd).items() if s != 'EXAMPLES'))


def compare_options(prog, help_text, scd):
    h, p = options(help_text), page_options(scd)
    case(f'{prog}: every option of --help is in its man page',
         [f'{o} is not in the page' for o in sorted(h - p)])
    case(f'{prog}: every option of its man page is in --help',
         [f'{o} is not in --help' for o in sorted(p - h)])


def help_commands(help_text):
    """Commands of a "Commands:" block: the leading lower-case words of its
    entries (two spaces in), e.g. "lun add", "stats", "generate-wwpn"."""
    cmds, inside = set(), False
    for line in help_text.splitlines():
        if line.strip() == 'Commands:':
            inside = True
            continue
        if inside and not line.strip():
            break
        m = re.match(r'^  ([a-z][a-z-]*(?: [a-z][a-z-]*)?)(?:\s|$)', line) if inside else None
        if m:
            cmds.add(m.group(1))
    return cmds


def page_commands(scd, section):
    text = sections(scd).get(section, '')
    return {m.group(1) for m in
            re.finditer(r'^\*([a-z][a-z-]*(?: [a-z][a-z-]*)?)[* ]', text, re.M)}


def compare_commands(what, help_text, scd, section):
    h, p = help_commands(help_text), page_commands(scd, section)
    problems = [] if h else ['no commands found in --help']
    problems += [f'"{c}" of --help has no entry in {section}' for c in sorted(h - p)]
    problems += [f'"{c}" of {section} is not a command of --help' for c in sorted(p - h)]
    case(f'vhost-scsi-ctl {what}: every command and subcommand is documented, and only those',
         problems)


def lun_spec_grammar():
    with open(os.environ['LUN_SPEC_C']) as f:
        src = f.read()
    kinds = re.findall(r'\{ "([a-z]+:(?://)?)", LUN_SPEC_', src)
    opts = re.findall(r'\{ "([a-z-]+)", OPT_[A-Z_]+, (true|false) \}', src)
    return kinds, opts


def check_lun_spec(scd):
    text = sections(scd).get('LUN SPEC', '')
    kinds, opts = lun_spec_grammar()
    problems = [] if kinds and opts else ['no kinds or options found in lun-spec.c']
    for k in kinds:
        if not re.search(r'^\*' + re.escape(k) + r'\*', text, re.M):
            problems.append(f'kind {k} has no entry')
    for key, has_value in opts:
        want = f'*,{key}=*' if has_value == 'true' else f'*,{key}*'
        if want not in text:
            problems.append(f'option {key} ({want}) is not documented')
    case('vhost-scsi-target(8): LUN SPEC documents every kind and option of hw/block/lun-spec.c', problems)


def check_roff(name):
    title, section = name.rsplit('.', 1)
    path = os.path.join(os.environ['MAN_BUILD'], name)
    problems = []
    try:
        with open(path) as f:
            roff = f.read()
    except OSError as e:
        case(f'{name}: built as roff', [f'{path}: {e.strerror}'])
        return
    if not re.search(rf'^\.TH "{re.escape(title)}" "{section}"', roff, re.M):
        problems.append('no .TH line with its name and section')
    for sh in ('NAME', 'SYNOPSIS', 'DESCRIPTION', 'SEE ALSO'):
        if f'.SH {sh}' not in roff:
            problems.append(f'no {sh} section')
    if shutil.which('groff'):
        p = subprocess.run(['groff', '-man', '-Tutf8', '-ww', '-z', path], capture_output=True,
                           text=True, timeout=30)
        if p.returncode or p.stderr.strip():
            problems.append(f'groff: exit {p.returncode}: {p.stderr.strip()}')
    else:
        problems.append('groff is not installed (scripts/install-deps.sh installs groff-base)')
    case(f'{name}: built as roff that groff formats cleanly', problems)


def main():
    target, ctl, bench = (os.environ[v] for v in
                          ('VHOST_SCSI_TARGET', 'VHOST_SCSI_CTL', 'VHOST_SCSI_BENCH'))
    target_help = help_of(target, '--help')
    lio_help = help_of(ctl, 'lio', '--help')
    ctl_target_help = help_of(ctl, 'target', '--help')
    bench_help = help_of(bench, '--help')

    compare_options('vhost-scsi-target', target_help, page('vhost-scsi-target.8'))
    compare_options('vhost-scsi-ctl', lio_help + ctl_target_help, page('vhost-scsi-ctl.8'))
    compare_options('vhost-scsi-bench', bench_help, page('vhost-scsi-bench.1'))
    compare_commands('lio', lio_help, page('vhost-scsi-ctl.8'), 'LIO COMMANDS')
    compare_commands('target', ctl_target_help, page('vhost-scsi-ctl.8'), 'TARGET COMMANDS')
    check_lun_spec(page('vhost-scsi-target.8'))
    for name in ('vhost-scsi-target.8', 'vhost-scsi-ctl.8', 'vhost-scsi-bench.1'):
        check_roff(name)

    print(f'1..{len(results)}')
    failed = 0
    for i, (name, problems) in enumerate(results, 1):
        print(f'{"not ok" if problems else "ok"} {i} - {name}')
        for p in problems:
            print(f'# {p}')
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())

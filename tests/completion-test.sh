#!/bin/bash
# The bash completion (tools/completion/vhost-scsi.bash), driven as bash
# drives it: COMP_WORDS and COMP_CWORD set, the function `complete -p`
# names for the command called, COMPREPLY read back.  Its lists are held
# to the programs: the options offered for "--" are exactly the long
# options of each --help, vhost-scsi-ctl's commands and subcommands those
# of `lio --help` and `target --help`, the LUN SPEC kinds and each kind's
# options those of hw/block/lun-spec.c's tables; values that are paths
# complete to files, with words bash split at '=' and ':' put back
# together.  Prints TAP.
#
# Environment (tests/meson.build): COMPLETION (the script), VHOST_SCSI_TARGET,
# VHOST_SCSI_CTL, VHOST_SCSI_BENCH, LUN_SPEC_C.
#
# SPDX-License-Identifier: GPL-2.0-or-later
set -uo pipefail
N=0 FAILED=0
pass() { N=$((N + 1)); echo "ok $N - $*"; }
fail() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $*"; }
WORK=$(mktemp -d /tmp/completion-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=/dev/null
source "$COMPLETION"

# Words sorted, one line, space-separated.
norm() { printf '%s\n' $* | sort | paste -sd' '; }

# The function `complete -p` names for each program, looked up once.
declare -A FUNC
for prog in vhost-scsi-target vhost-scsi-ctl vhost-scsi-bench; do
    f=$(complete -p "$prog" 2>/dev/null) && f=${f#*-F } && FUNC[$prog]=${f%% *}
done

# comp WORD... : the sorted completions of the last word (as bash leaves them).
comp() {
    local func=${FUNC[$1]-}
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="$*"
    COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    [ -n "$func" ] || { echo "(no completion for $1)"; return; }
    "$func" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    norm "${COMPREPLY[@]}"
}

# expect NAME WANT WORD... : the completions of WORD... are WANT (sorted, space-separated).
expect() {
    local name=$1 want got
    want=$(norm $2)
    shift 2
    got=$(comp "$@")
    if [ "$got" = "$want" ]; then
        pass "$name"
    else
        fail "$name"
        echo "#   words: $*"
        echo "#   want:  $want"
        echo "#   got:   $got"
    fi
}

# Each --help, read once (a loaded machine makes every start slow).
"$VHOST_SCSI_TARGET" --help >"$WORK/target.help"
"$VHOST_SCSI_CTL" lio --help >"$WORK/lio.help"
"$VHOST_SCSI_CTL" target --help >"$WORK/ctl-target.help"
"$VHOST_SCSI_BENCH" --help >"$WORK/bench.help"
# The long options a --help (file) names.
long_opts() { grep -o -- '--[a-z][a-z0-9-]*' "$WORK/$1.help" | sort -u | tr '\n' ' '; }
# The values --help gives --rw ("--rw MODE  read|write|...").
rw_modes() { grep -o -- '--rw MODE *[a-z|]*' "$WORK/bench.help" | sed 's/.* //' | tr '|' '\n' | sort | tr '\n' ' '; }
# The commands of a "Commands:" block (entries two spaces in), their first word or two.
help_cmds() {
    sed -n '/^Commands:/,/^$/p' "$WORK/$1.help" |
        sed -n 's/^  \([a-z][a-z-]*\)\( [a-z][a-z-]*\)\{0,1\}\( .*\)\{0,1\}$/\1\2/p' | sort -u
}
# lun-spec.c's kinds, and the options (KEY or KEY=) a kind allows.
spec_kinds() { grep -o '{ "[a-z]*:\(//\)\{0,1\}", LUN_SPEC_' "$LUN_SPEC_C" | cut -d'"' -f2 | tr '\n' ' '; }
spec_opts() {
    local bits b key
    bits=$(tr '\n' ' ' <"$LUN_SPEC_C" | grep -o '{ "[a-z]*:\(//\)\{0,1\}", LUN_SPEC_[A-Z]*, [^}]*}' |
           grep -F "{ \"$1\"," | grep -o 'OPT_[A-Z_]*')
    for b in $bits; do
        key=$(grep -o "{ \"[a-z-]*\", $b, \(true\|false\) }" "$LUN_SPEC_C")
        case $key in
        *true*) key=${key#*\"}; printf '%s= ' "${key%%\"*}" ;;
        *) key=${key#*\"}; printf '%s ' "${key%%\"*}" ;;
        esac
    done
}
with_prefix() { local p=$1 w; shift; for w in $*; do printf '%s ' "$p$w"; done; }

T=vhost-scsi-target C=vhost-scsi-ctl B=vhost-scsi-bench

if [ -n "${FUNC[$T]-}" ] && [ -n "${FUNC[$C]-}" ] && [ -n "${FUNC[$B]-}" ]; then
    pass "the script registers completion functions for the three programs"
else
    fail "the script registers completion functions for the three programs"
fi
expect "$T: '--' offers exactly the long options of its --help" \
    "$(long_opts target)" $T --
expect "$T: '--socket' completes to its options of that prefix" \
    "--socket-path --socket-group" $T --socket
expect "$T: --poll offers off, adaptive, on" "off adaptive on" $T --poll ''
expect "$T: --lun ID= offers every kind of hw/block/lun-spec.c" \
    "$(with_prefix 0= "$(spec_kinds)")" $T --lun 0=
expect "$T: --lun as bash splits it (0 = r) offers ram: and rbd: for the last piece" \
    "ram: rbd:" $T --lun 0 = r
for kind in $(spec_kinds); do
    case $kind in
    iscsi://) base=iscsi://h/iqn.2026-12.org.x:d/1 ;;
    rbd:) base=rbd:pool/img ;;
    file:) base=file:/x ;;
    *) base=${kind}1G ;;
    esac
    expect "$T: after '$kind...,' the options hw/block/lun-spec.c allows $kind" \
        "$(with_prefix "1=$base," "$(spec_opts $kind)")" $T --lun "1=$base,"
done
mkdir -p "$WORK/d" && : >"$WORK/disk.img" && : >"$WORK/dump.bin"
expect "$T: --lun ID=file: completes the path (directories with a slash)" \
    "1=file:$WORK/d/ 1=file:$WORK/disk.img 1=file:$WORK/dump.bin" $T --lun "1=file:$WORK/d"
expect "$T: an rbd: keyring= value completes to files" "1=rbd:p/i,keyring=$WORK/disk.img" \
    $T --lun "1=rbd:p/i,keyring=$WORK/dis"
expect "$T: null:'s fill= offers zero and none" "1=null:1G,fill=none 1=null:1G,fill=zero" \
    $T --lun "1=null:1G,fill="
expect "$T: --config completes to files" "$WORK/disk.img" $T --config "$WORK/dis"
expect "$C: the first word is lio or target" "lio target" $C ''
expect "$C lio: the commands of 'lio --help'" \
    "$(help_cmds lio | cut -d' ' -f1 | sort -u | tr '\n' ' ')" $C lio ''
# (--lun is vhost-scsi-target's, --control the target mode's, named in passing.)
expect "$C lio: '--' offers exactly the long options of 'lio --help'" \
    "$(long_opts lio | tr ' ' '\n' | grep -vx -e --lun -e --control | tr '\n' ' ')" \
    $C lio --
expect "$C lio lun: the subcommands of 'lio --help'" \
    "$(help_cmds lio | sed -n 's/^lun //p' | tr '\n' ' ')" $C lio lun ''
expect "$C lio lun add WWPN LUN: the kinds LIO can express" "file: ram: null:" \
    $C lio lun add naa.5001405aabbccdd 0 ''
expect "$C lio save FILE --format: the formats save writes" "native targetcli" \
    $C lio save /tmp/x.json --format ''
expect "$C target: the commands of 'target --help'" \
    "$(help_cmds ctl-target | cut -d' ' -f1 | sort -u | tr '\n' ' ')" $C target ''
problems=""
for cmd in $(help_cmds ctl-target | awk 'NF == 2 {print $1}' | sort -u); do
    want=$(help_cmds ctl-target | awk -v c="$cmd" '$1 == c {print $2}' | sort |
           tr '\n' ' ' | sed 's/ $//')
    got=$(comp $C --control x.ctl target "$cmd" '')
    [ "$got" = "$want" ] || problems+=" $cmd: want '$want', got '$got';"
done
if [ -z "$problems" ]; then
    pass "$C target: every command's subcommands are those of 'target --help'"
else
    fail "$C target: every command's subcommands are those of 'target --help'"
    echo "#$problems"
fi
expect "$C target: '--' before the command offers its global options" \
    "--control --controller --help --json --timeout-ms --version" $C target --
expect "$C target controller add NAME SOCKET --: the options of controller add" \
    "--allow-gid --allow-uid --initiator --queues --socket-group" \
    $C target controller add vm2 /run/vm2.sock --
expect "$C target lun add 1=rb offers rbd: (words split at '=')" "rbd:" \
    $C target --controller vm2 lun add 1 = rb
expect "$C lio lun add: a WWPN with ':' (iqn.) that bash split still counts as one word" "file: ram: null:" \
    $C lio lun add iqn.2026-12.org.x : t1 0 ''
expect "$B: '--' offers exactly the long options of its --help" \
    "$(long_opts bench)" $B --
expect "$B: --rw offers the modes its --help lists" "$(rw_modes)" $B --rw ''
expect "$B: --socket= completes to files" "$WORK/dump.bin" $B --socket = "$WORK/du"

echo "1..$N"
[ "$FAILED" = 0 ]

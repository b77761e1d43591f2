# bash completion for vhost-scsi-target, vhost-scsi-ctl and vhost-scsi-bench:
# their options, vhost-scsi-ctl's commands and subcommands, and the LUN
# SPEC grammar of hw/block/lun-spec.c (kinds, each kind's options, file names
# where a value is a path).  Installed once as vhost-scsi-target in
# bash-completion's completionsdir, with the other two names linked to it
# (bash-completion loads a command's file by its name).  The lists are
# checked against each program's --help and hw/block/lun-spec.c by
# tests/completion-test.sh.  Needs nothing but bash; with bash-completion
# loaded or not, a word that bash split at '=' or ':' (an ID=SPEC, an
# iscsi:// URL) is put back together before it is completed.
#
# SPDX-License-Identifier: GPL-2.0-or-later

_vhost_scsi_target_opts='--socket-path --fd --lun --queues --threads --poll --poll-us
    --socket-group --allow-uid --allow-gid --max-connections --max-connections-per-uid
    --max-mem-regions --max-inflight --pr-dir --config --control --message-timeout-ms
    --control-max-request --control-timeout-ms --sandbox --sandbox-user --print-capabilities --verbose
    --version --help'
_vhost_scsi_bench_opts='--socket --kernel --rw --rwmixread --bs --iodepth --queues
    --first-queue --time --ios --lun --pid --json --verify --quiet --no-event-idx --indirect
    --poll --packed --inflight --rate --queue-size --dirty-log --idle --flush-first --version --help'
_vhost_scsi_lio_opts='--configfs --tpgt --nexus --force --json --format --partial --bus --num-queues
    --verbose --version --help'
_vhost_scsi_ctl_target_opts='--control --controller --json --timeout-ms --version --help'
_vhost_scsi_lun_kinds='file: ram: null: iscsi:// rbd: hold:'

# COMPREPLY from candidates (full values of the argument being completed),
# of which bash replaces only the last piece it split off ($cur).
_vhost_scsi_reply()
{
    local arg=$1 cur=$2 nospace=$3 c
    shift 3
    local keep=${arg%"$cur"}
    COMPREPLY=()
    for c in "$@"; do
        [[ $c == "$arg"* ]] && COMPREPLY+=("${c#"$keep"}")
    done
    [[ $nospace && ${#COMPREPLY[@]} -gt 0 ]] && compopt -o nospace 2>/dev/null
    return 0
}

# COMPREPLY from the candidates a command ($2...) prints, one a line; $1 as for
# _vhost_scsi_reply (non-empty: no space after a completion).
_vhost_scsi_reply_lines()
{
    local nospace=$1 c
    local -a all=()
    shift
    while IFS= read -r c; do
        all+=("$c")
    done < <("$@")
    _vhost_scsi_reply "$_vs_arg" "$_vs_cur" "$nospace" "${all[@]}"
}

# Paths starting with $2 (directories with a trailing slash), prefixed with $1.
_vhost_scsi_paths()
{
    local prefix=$1 p
    while IFS= read -r p; do
        [[ -d $p ]] && p+=/
        printf '%s\n' "$prefix$p"
    done < <(compgen -f -- "$2")
}

# The options a kind accepts after a comma (hw/block/lun-spec.c's table).
_vhost_scsi_kind_opts()
{
    case $1 in
    file:) echo 'ro direct block-size= size= physical-block-size= sanitize=' ;;
    ram:) echo 'ro block-size= physical-block-size= sanitize=' ;;
    null:) echo 'ro block-size= fill= physical-block-size= sanitize=' ;;
    iscsi://) echo 'ro queue-depth= sessions= secret-file= initiator-name= login-timeout= sanitize=' ;;
    rbd:) echo 'ro conf= id= keyring= sanitize= busy-timeout=' ;;
    hold:) echo 'block-size= while=' ;;
    esac
}

# Candidates for a SPEC ($1) of the given kinds ($2); one per line.
_vhost_scsi_spec()
{
    local spec=$1 kinds=$2 k kind= o last
    for k in $kinds; do
        [[ $spec == "$k"* ]] && kind=$k
    done
    if [[ -z $kind ]]; then
        printf '%s\n' $kinds
        return
    fi
    if [[ $spec != *,* ]]; then
        [[ $kind == file: ]] && _vhost_scsi_paths file: "${spec#file:}"
        return
    fi
    last=${spec##*,}
    case $last in
    secret-file=* | conf=* | keyring=* | while=*)
        _vhost_scsi_paths "${spec%=*}=" "${last#*=}"
        return ;;
    block-size=*)
        printf '%s\n' "${spec%,*},block-size=512" "${spec%,*},block-size=4096"
        return ;;
    fill=*)
        printf '%s\n' "${spec%,*},fill=zero" "${spec%,*},fill=none"
        return ;;
    sanitize=*)
        printf '%s\n' "${spec%,*},sanitize=on" "${spec%,*},sanitize=off"
        return ;;
    *=*) return ;;
    esac
    for o in $(_vhost_scsi_kind_opts "$kind"); do
        printf '%s\n' "${spec%,*},$o"
    done
}

# Candidates for an ID=SPEC ($1).
_vhost_scsi_lun_arg()
{
    local arg=$1 c
    if [[ $arg != *=* ]]; then
        printf '%s\n' "${arg:-0}="
        return
    fi
    while IFS= read -r c; do
        printf '%s\n' "${arg%%=*}=$c"
    done < <(_vhost_scsi_spec "${arg#*=}" "$_vhost_scsi_lun_kinds")
}

# Puts back together the word bash split at '=' and ':' ending at COMP_CWORD:
# sets _vs_arg (the whole argument), _vs_cur (the piece bash replaces),
# _vs_prev (the word before the argument) and _vs_i (its first index).
_vhost_scsi_words()
{
    local i=$COMP_CWORD
    _vs_cur=${COMP_WORDS[i]}
    _vs_arg=$_vs_cur
    while ((i > 1)) && [[ ${COMP_WORDS[i]} == [=:] || ${COMP_WORDS[i - 1]} == [=:] ]]; do
        ((i--))
        _vs_arg=${COMP_WORDS[i]}$_vs_arg
    done
    # "--opt=VALUE" as one argument: the option is the previous word.
    if [[ $_vs_arg == --*=* ]]; then
        _vs_prev=${_vs_arg%%=*}
        _vs_arg=${_vs_arg#*=}
        [[ $_vs_cur == = ]] && _vs_cur=
    else
        _vs_prev=${COMP_WORDS[i - 1]}
    fi
    [[ $_vs_cur == [=:] ]] && _vs_cur=
    _vs_i=$i
}

_vhost_scsi_target()
{
    local _vs_arg _vs_cur _vs_prev _vs_i
    _vhost_scsi_words
    case $_vs_prev in
    --socket-path | --config | --control | --pr-dir)
        _vhost_scsi_reply_lines 1 _vhost_scsi_paths '' "$_vs_arg"
        return ;;
    --lun)
        _vhost_scsi_reply_lines 1 _vhost_scsi_lun_arg "$_vs_arg"
        return ;;
    --poll)
        _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' off adaptive on
        return ;;
    --sandbox)
        _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' seccomp none
        return ;;
    --socket-group)
        mapfile -t COMPREPLY < <(compgen -g -- "$_vs_arg")
        return ;;
    --sandbox-user)
        mapfile -t COMPREPLY < <(compgen -u -- "$_vs_arg")
        return ;;
    --fd | --queues | --threads | --poll-us | --allow-uid | --allow-gid | --max-connections | \
    --max-connections-per-uid | --message-timeout-ms | --max-mem-regions | --max-inflight | \
    --control-max-request | --control-timeout-ms)
        COMPREPLY=()
        return ;;
    esac
    _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' $_vhost_scsi_target_opts
}

_vhost_scsi_bench()
{
    local _vs_arg _vs_cur _vs_prev _vs_i
    _vhost_scsi_words
    case $_vs_prev in
    --socket)
        _vhost_scsi_reply_lines 1 _vhost_scsi_paths '' "$_vs_arg"
        return ;;
    --rw)
        _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' read write randread randwrite rw hostile aptpl unmap
        return ;;
    --bs)
        _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' 512 4k 8k 16k 64k 128k 1m
        return ;;
    --kernel | --rwmixread | --iodepth | --queues | --first-queue | --time | --ios | --lun | \
    --pid | --queue-size)
        COMPREPLY=()
        return ;;
    esac
    _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' $_vhost_scsi_bench_opts
}

# The vhost targets configfs holds (the WWPNs of lio commands).
_vhost_scsi_wwpns()
{
    local d
    for d in /sys/kernel/config/target/vhost/*/; do
        d=${d%/}
        d=${d##*/}
        [[ $d == naa.* || $d == iqn.* || $d == eui.* ]] && printf '%s\n' "$d"
    done
}

_vhost_scsi_ctl_lio()
{
    local -a pos=("$@")
    case $_vs_prev in
    --configfs)
        _vhost_scsi_reply_lines 1 _vhost_scsi_paths '' "$_vs_arg"
        return ;;
    --tpgt | --nexus | --bus | --num-queues)
        COMPREPLY=()
        return ;;
    --format)
        _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' native targetcli
        return ;;
    esac
    if [[ $_vs_arg == -* ]]; then
        _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' $_vhost_scsi_lio_opts
        return
    fi
    case ${#pos[@]}:${pos[0]-}:${pos[1]-} in
    0::)
        _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' create delete lun list save restore \
            qemu-args generate-wwpn ;;
    1:lun:)
        _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' add remove ;;
    1:delete:* | 1:qemu-args:* | 2:lun:add | 2:lun:remove)
        _vhost_scsi_reply_lines '' _vhost_scsi_wwpns ;;
    4:lun:add)
        # LIO can express file:, ram: and null: (vhost-scsi-ctl(8)).
        _vhost_scsi_reply_lines 1 _vhost_scsi_spec "$_vs_arg" 'file: ram: null:' ;;
    1:save:* | 1:restore:*)
        _vhost_scsi_reply_lines 1 _vhost_scsi_paths '' "$_vs_arg" ;;
    *)
        COMPREPLY=() ;;
    esac
}

_vhost_scsi_ctl_target()
{
    local -a pos=("$@")
    case $_vs_prev in
    --control)
        _vhost_scsi_reply_lines 1 _vhost_scsi_paths '' "$_vs_arg"
        return ;;
    --controller | --timeout-ms | --queues | --allow-uid | --allow-gid | --initiator | --iops | \
    --bandwidth | --backend)
        COMPREPLY=()
        return ;;
    --socket-group)
        mapfile -t COMPREPLY < <(compgen -g -- "$_vs_arg")
        return ;;
    esac
    local cmd="${pos[0]-} ${pos[1]-}"
    if [[ $_vs_arg == -* ]]; then
        case ${#pos[@]}:$cmd in
        0:*) _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' $_vhost_scsi_ctl_target_opts ;;
        [3-9]:"controller add" | [1-9][0-9]:"controller add")
            _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' --queues --allow-uid --allow-gid \
                --socket-group --initiator ;;
        [2-9]:"qos set") _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' --iops --bandwidth ;;
        1:"stats ") _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' --controller --backend --prometheus ;;
        *) COMPREPLY=() ;;
        esac
        return
    fi
    case ${#pos[@]}:$cmd in
    0:*)
        _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' version method lun backend connection \
            controller qos stats config ;;
    1:"lun ") _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' list add remove resize map unmap ;;
    1:"backend ") _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' add remove resize list ;;
    1:"connection ") _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' list ;;
    1:"method ") _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' list ;;
    1:"controller ") _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' add remove list ;;
    1:"qos ") _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' set ;;
    1:"config ") _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' save ;;
    2:"lun add")
        _vhost_scsi_reply_lines 1 _vhost_scsi_lun_arg "$_vs_arg" ;;
    3:"backend add")
        _vhost_scsi_reply_lines 1 _vhost_scsi_spec "$_vs_arg" "$_vhost_scsi_lun_kinds" ;;
    2:"config save" | 3:"controller add")
        _vhost_scsi_reply_lines 1 _vhost_scsi_paths '' "$_vs_arg" ;;
    *) COMPREPLY=() ;;
    esac
}

_vhost_scsi_ctl()
{
    local _vs_arg _vs_cur _vs_prev _vs_i
    _vhost_scsi_words
    local -a pos=()
    local i w skip=
    # The words before the argument: the mode (lio/target), then its positional words
    # (options and their values left out).
    for ((i = 1; i < _vs_i; i++)); do
        w=${COMP_WORDS[i]}
        # One argument bash split at '=' or ':' (an ID=SPEC, an iqn. WWPN) is one word here.
        while ((i + 1 < _vs_i)) && [[ ${COMP_WORDS[i + 1]} == [=:] || ${COMP_WORDS[i]} == [=:] ]]; do
            ((i++))
            w+=${COMP_WORDS[i]}
        done
        if [[ $skip ]]; then
            skip=
            continue
        fi
        case $w in
        --configfs | --tpgt | --nexus | --bus | --num-queues | --control | --controller | \
        --timeout-ms | --queues | --allow-uid | --allow-gid | --socket-group | --initiator | \
        --iops | --bandwidth | --backend)
            skip=1 ;;
        -*) ;;
        *) pos+=("$w") ;;
        esac
    done
    if ((${#pos[@]} == 0)); then
        if [[ $_vs_arg == -* ]]; then
            _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' --help
        else
            _vhost_scsi_reply "$_vs_arg" "$_vs_cur" '' lio target
        fi
        return
    fi
    case ${pos[0]} in
    lio) _vhost_scsi_ctl_lio "${pos[@]:1}" ;;
    target) _vhost_scsi_ctl_target "${pos[@]:1}" ;;
    *) COMPREPLY=() ;;
    esac
}

complete -F _vhost_scsi_target vhost-scsi-target
complete -F _vhost_scsi_ctl vhost-scsi-ctl
complete -F _vhost_scsi_bench vhost-scsi-bench

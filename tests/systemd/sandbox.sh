#!/usr/bin/env bash
# A throwaway systemd for the unit tests: a Debian minbase rootfs (built once by
# debootstrap, cached) booted with `systemd-nspawn --boot`, its writes kept in
# RAM (--volatile=overlay) and gone at stop.
#
#   sandbox.sh rootfs                    build the cached rootfs if needed; print its path
#   sandbox.sh boot NAME [NSPAWN-OPT...] boot a container, e.g. --bind-ro=HOST:GUEST;
#                                        returns once its systemd has finished booting
#   sandbox.sh run NAME CMD [ARG...]     run CMD inside (systemctl, journalctl, ldd...)
#   sandbox.sh copy NAME SRC DEST        copy the host file SRC to DEST inside
#   sandbox.sh running NAME              exit 0 if NAME is booted, 1 if not
#   sandbox.sh pid NAME                  the host pid of its init (its services are children of it)
#   sandbox.sh stop NAME                 power it off (killed after the deadline)
#
# Exit status: 0 done, 1 failed, 2 usage, 77 a container cannot boot here (not
# root, no systemd-nspawn or debootstrap, no Debian mirror reachable, nspawn
# refused to start) -- the reason is the last line on stderr.
#
# The container shares the host's network: a daemon bound to 127.0.0.1:PORT
# inside answers the test on the host. Without systemd on the host (no
# machined), the container is not registered and gets a cgroup of its own.
#
# Environment:
#   ZDIST_SANDBOX_CACHE    where rootfs builds live  (/var/cache/zdist/sandbox)
#   ZDIST_SANDBOX_STATE    per-container state        (/run/zdist-sandbox)
#   ZDIST_SANDBOX_MIRROR   Debian archive             (the host's apt source, else deb.debian.org)
#   ZDIST_SANDBOX_SUITE    Debian suite               (the host's codename, else bookworm)
#   ZDIST_SANDBOX_TIMEOUT  seconds allowed for a boot or a poweroff (120)
set -euo pipefail

CACHE=${ZDIST_SANDBOX_CACHE:-/var/cache/zdist/sandbox}
STATE=${ZDIST_SANDBOX_STATE:-/run/zdist-sandbox}
TIMEOUT=${ZDIST_SANDBOX_TIMEOUT:-120}

# The recipe: PACKAGES, the suite and build_rootfs below. Changing any of them
# makes a new rootfs; the old one goes once no container runs from it. Beside
# systemd: what the daemons load at run time (ldd zdist-psd zdist-worker
# zdist-coordinator) and gcc-12's sanitizer runtimes for the ASan/UBSan builds
# the tests use.
PACKAGES=(
    systemd systemd-sysv dbus libnss-systemd
    libzmq5 libczmq4 libprotobuf-c1 libjansson4 libopenblas0 libsystemd0 zlib1g libmicrohttpd12
    libasan8 libubsan1
)

say() { echo "sandbox: $*" >&2; }
die() { say "$*"; exit 1; }
cannot() { say "$*"; exit 77; }

need_root() { [[ $(id -u) -eq 0 ]] || cannot "needs root to boot a container"; }

need_tools() {
    local t
    for t in "$@"; do
        command -v "$t" >/dev/null ||
            cannot "no $t on this machine (scripts/install-deps.sh installs debootstrap and systemd-container)"
    done
}

check_name() {
    [[ ${1:-} =~ ^[A-Za-z0-9][A-Za-z0-9-]{0,30}$ ]] || die "bad container name '${1:-}': letters, digits and '-', at most 31"
}

suite() {
    local s=${ZDIST_SANDBOX_SUITE:-}
    # shellcheck disable=SC1091
    [[ -n $s ]] || s=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
    echo "${s:-bookworm}"
}

# The archive the host's apt already uses for the suite (apt-cache policy
# lists "500 URI SUITE/main ARCH Packages" whatever the sources' format).
mirror() {
    local m=${ZDIST_SANDBOX_MIRROR:-}
    if [[ -z $m ]] && command -v apt-cache >/dev/null; then
        m=$(apt-cache policy 2>/dev/null | awk -v s="$1/main" '$3 == s && $2 ~ /^https?:/ { print $2; exit }')
    fi
    echo "${m:-http://deb.debian.org/debian}"
}

# build_rootfs DIR SUITE MIRROR: the rootfs, from nothing.
build_rootfs() {
    local dir=$1 suite=$2 mirror=$3 t
    # (Called as a condition, where set -e does not hold: stop by hand.)
    debootstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" "$suite" "$dir" "$mirror" || return 1
    # Timers the image enables (apt downloads, dpkg backups...) would only add
    # load and journal lines to a test: mask them.
    for t in "$dir"/etc/systemd/system/timers.target.wants/*.timer; do
        if [[ -e $t ]]; then
            rm -f "$t"
            ln -sf /dev/null "$dir/etc/systemd/system/$(basename "$t")"
        fi
    done
    # The container is named by nspawn (--machine), not by the build host.
    rm -f "$dir/etc/hostname"
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
}

recipe() {
    printf 'suite %s\npackages %s\n' "$1" "${PACKAGES[*]}"
    declare -f build_rootfs
}

# in_use ROOT: a booted container runs from ROOT.
in_use() {
    local d
    for d in "$STATE"/*/; do
        [[ -r $d/rootfs && $(cat "$d/rootfs") == "$1" ]] && nspawn_pid "$(basename "$d")" >/dev/null && return 0
    done
    return 1
}

cmd_rootfs() {
    local s id root m tmp old t0=$SECONDS
    need_root
    need_tools debootstrap systemd-nspawn
    s=$(suite)
    id=$(recipe "$s" | sha256sum | cut -c1-16)
    root=$CACHE/rootfs-$id
    mkdir -p "$CACHE"
    exec 8>"$CACHE/lock"
    flock 8
    if [[ ! -e $root/.zdist-sandbox ]]; then
        m=$(mirror "$s")
        wget -q -T 20 -t 2 -O /dev/null "$m/dists/$s/Release" ||
            cannot "no Debian mirror reachable at $m for '$s' (set ZDIST_SANDBOX_MIRROR)"
        tmp=$CACHE/.build-$id
        rm -rf "$tmp"
        say "building the rootfs: debootstrap --variant=minbase $s from $m into $root (once; a minute or two)"
        if ! build_rootfs "$tmp" "$s" "$m" >"$CACHE/build.log" 2>&1; then
            tail -n 15 "$CACHE/build.log" >&2
            rm -rf "$tmp"
            die "the rootfs build failed (whole log: $CACHE/build.log)"
        fi
        { recipe "$s"; echo "mirror $m"; echo "built $(date -u +%FT%TZ) in $((SECONDS - t0)) s"; } >"$tmp/.zdist-sandbox"
        mv "$tmp" "$root"
        say "rootfs built in $((SECONDS - t0)) s ($(du -sh "$root" | cut -f1))"
    fi
    for old in "$CACHE"/rootfs-*; do
        if [[ -d $old && $old != "$root" ]] && ! in_use "$old"; then
            rm -rf "$old"
            say "removed the stale rootfs $old"
        fi
    done
    echo "$root"
}

# ---- one container's state: $STATE/NAME/{pid,rootfs,cgroups,nspawn.log} ----

# exists PID: PID is a process, not a zombie.
exists() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != Z ]]
}

# alive PID COMM: PID exists and runs COMM.
alive() {
    exists "$1" && [[ $(cat "/proc/$1/comm" 2>/dev/null) == "$2" ]]
}

nspawn_pid() {
    local pid
    pid=$(cat "$STATE/$1/pid" 2>/dev/null) || return 1
    alive "$pid" systemd-nspawn && echo "$pid"
}

# The container's PID 1 (systemd), as a host pid: a child of nspawn.
init_pid() {
    local np c
    np=$(nspawn_pid "$1") || return 1
    # shellcheck disable=SC2013 # a list of pids
    for c in $(cat /proc/"$np"/task/*/children 2>/dev/null); do
        alive "$c" systemd && { echo "$c"; return 0; }
    done
    return 1
}

# enter PID CMD...: CMD in every namespace of the container whose init is PID,
# with a clean environment.
enter() {
    local pid=$1
    shift
    nsenter --target "$pid" --mount --uts --ipc --net --pid --cgroup --root --wd -- \
        env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin LANG=C.UTF-8 HOME=/root \
        SYSTEMD_PAGER= SYSTEMD_COLORS=0 "$@"
}

# Give the calling shell a cgroup of its own in every hierarchy systemd uses,
# and record them: nspawn then makes its payload/supervisor cgroups below it,
# apart from any other container's.
own_cgroup() {
    local name=$1 line rel mnt dir
    : >"$STATE/$name/cgroups"
    while IFS= read -r line; do
        case $line in
            0::*) rel=${line#0::} mnt=$(findmnt -n -o TARGET -t cgroup2 | head -n 1) ;;
            *:name=systemd:*) rel=${line#*:name=systemd:} mnt=$(findmnt -n -o TARGET,OPTIONS -t cgroup |
                awk '$2 ~ /(^|,)name=systemd(,|$)/ { print $1; exit }') ;;
            *) continue ;;
        esac
        [[ -n $mnt ]] || continue
        dir=${mnt%/}${rel%/}/zdist-sandbox-$name
        mkdir -p "$dir" && echo "$BASHPID" >"$dir/cgroup.procs" && echo "$dir" >>"$STATE/$name/cgroups"
    done </proc/self/cgroup
}

# Remove the container's cgroups, killing anything still in them.
drop_cgroups() {
    local f=$STATE/$1/cgroups dir p
    [[ -r $f ]] || return 0
    while IFS= read -r dir; do
        [[ -d $dir ]] || continue
        find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r p; do kill -KILL "$p" 2>/dev/null || true; done
        find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done <"$f"
}

cmd_boot() {
    local name=$1 root np ip state deadline why
    shift
    check_name "$name"
    root=$(cmd_rootfs)
    need_tools nsenter findmnt
    if np=$(nspawn_pid "$name"); then die "container '$name' is already running (nspawn pid $np)"; fi
    rm -rf "${STATE:?}/$name"
    mkdir -p "$STATE/$name"
    echo "$root" >"$STATE/$name/rootfs"
    local -a args=(--quiet --directory="$root" --boot --volatile=overlay --machine="$name"
        --console=read-only --link-journal=no)
    # No systemd on the host: nothing to register with, no scope to create.
    [[ -d /run/systemd/system ]] || args+=(--register=no --keep-unit)
    (
        [[ -d /run/systemd/system ]] || own_cgroup "$name"
        exec setsid systemd-nspawn "${args[@]}" "$@" </dev/null >"$STATE/$name/nspawn.log" 2>&1
    ) &
    echo $! >"$STATE/$name/pid"

    # Its init appears within moments of the fork; then systemd itself says
    # when the boot is over (is-system-running --wait blocks until then).
    deadline=$((SECONDS + TIMEOUT))
    until ip=$(init_pid "$name"); do
        if ! exists "$(cat "$STATE/$name/pid")"; then
            why=$(head -n 3 "$STATE/$name/nspawn.log" 2>/dev/null | paste -sd ' ')
            cmd_stop "$name"
            cannot "systemd-nspawn could not start the container: $why"
        fi
        ((SECONDS < deadline)) || { cmd_stop "$name"; cannot "no init in the container within $TIMEOUT s"; }
        sleep 0.1
    done
    while :; do
        state=$(timeout $((deadline > SECONDS ? deadline - SECONDS : 1)) \
            nsenter --target "$ip" --mount --pid -- /usr/bin/systemctl is-system-running --wait 2>/dev/null) || true
        case $state in
            running) break ;;
            degraded)
                say "'$name' booted degraded; failed units: $(enter "$ip" systemctl --failed --plain --no-legend | awk '{printf " %s", $1}')"
                break ;;
        esac
        if ((SECONDS >= deadline)); then
            tail -n 20 "$STATE/$name/nspawn.log" >&2
            cmd_stop "$name"
            cannot "the container's systemd did not finish booting within $TIMEOUT s (state: ${state:-no answer})"
        fi
        sleep 0.2 # its bus is not up yet
    done
    say "'$name' booted in $((TIMEOUT - (deadline - SECONDS))) s (nspawn pid $(cat "$STATE/$name/pid"), init pid $ip)"
}

cmd_run() {
    local name=$1 ip
    shift
    check_name "$name"
    (($# > 0)) || die "usage: sandbox.sh run NAME CMD [ARG...]"
    ip=$(init_pid "$name") || die "container '$name' is not running"
    enter "$ip" "$@"
}

cmd_copy() {
    local name=$1 src=$2 dest=$3
    [[ -r $src ]] || die "cannot read '$src'"
    [[ $dest == /* ]] || die "the destination '$dest' is not an absolute path"
    # shellcheck disable=SC2016 # expanded by the container's sh
    cmd_run "$name" sh -c 'mkdir -p "$(dirname "$1")" && cat >"$1"' sh "$dest" <"$src"
}

cmd_running() {
    check_name "$1"
    init_pid "$1" >/dev/null
}

cmd_pid() {
    check_name "$1"
    init_pid "$1" || die "container '$1' is not running"
}

cmd_stop() {
    local name=$1 np
    check_name "$name"
    if np=$(nspawn_pid "$name"); then
        # nspawn answers SIGTERM by asking the container's systemd to power off.
        kill -TERM "$np" 2>/dev/null || true
        if ! timeout "$TIMEOUT" tail --pid="$np" -s 0.2 -f /dev/null; then
            say "'$name' did not power off within $TIMEOUT s: killing it"
            kill -KILL "$np" 2>/dev/null || true
        fi
    fi
    drop_cgroups "$name"
    rm -rf "${STATE:?}/$name"
}

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
    exit 2
}

sub=${1:-}
(($# > 0)) && shift
case $sub in
    rootfs) (($# == 0)) || usage; cmd_rootfs ;;
    boot) (($# >= 1)) || usage; need_root; cmd_boot "$@" ;;
    run) (($# >= 2)) || usage; need_root; cmd_run "$@" ;;
    copy) (($# == 3)) || usage; need_root; cmd_copy "$@" ;;
    running) (($# == 1)) || usage; need_root; cmd_running "$1" ;;
    pid) (($# == 1)) || usage; need_root; cmd_pid "$1" ;;
    stop) (($# == 1)) || usage; need_root; cmd_stop "$1" ;;
    *) usage ;;
esac

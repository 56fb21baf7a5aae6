# shellcheck shell=bash disable=SC2034 # NETNS_* are for the scripts that source this
# Hosts as Linux network namespaces, joined by veth pairs on one bridge.
# Sourced by deploy/multihost/run.sh and tests/chaos/run.sh.
#
#   netns_why TAG              prints why namespaces cannot be made here (root,
#                              ip(8), a probe namespace) and fails; silent and 0 when they can
#   netns_up TAG HOST...       bridge TAG-br and one namespace TAG-HOST per host, its
#                              eth0 at NETNS_ADDR[HOST] on a free /24; the root
#                              namespace's end of its veth pair is NETNS_VETH[HOST]
#                              (take the host's link down with `ip link set ... down`
#                              on it). The bridge itself gets NETNS_SUBNET.1, so that
#                              the root namespace (a CLI) reaches every host.
#                              Run CMD on HOST with `ip netns exec "$NETNS_TAG-HOST" CMD`
#                              (ip execs CMD: in the background, $! is CMD itself).
#   netns_down                 every namespace and the bridge removed
declare -A NETNS_ADDR=() NETNS_VETH=()
NETNS_TAG=""
NETNS_HOSTS=()
NETNS_SUBNET=""

netns_why() {
    if [[ $(id -u) -ne 0 ]]; then echo "needs root to create network namespaces"; return 1; fi
    if ! command -v ip >/dev/null; then echo "no ip(8) (iproute2)"; return 1; fi
    if ! ip netns add "${1}probe" 2>/dev/null; then echo "cannot create a network namespace here"; return 1; fi
    ip netns del "${1}probe"
}

netns_up() {
    NETNS_TAG=$1
    shift
    NETNS_HOSTS=("$@")
    local h ns i=10
    # A /24 no route of this host uses yet (another run's bridge, a real
    # network), drawn from /dev/urandom: not from $RANDOM, which a caller may
    # have seeded (two runs with one seed would pick the same one).
    for _ in $(seq 50); do
        NETNS_SUBNET=10.213.$(($(od -An -N2 -tu2 /dev/urandom) % 200 + 20))
        [[ -z $(ip route show "$NETNS_SUBNET.0/24" 2>/dev/null) ]] && break
    done
    ip link add "$NETNS_TAG-br" type bridge || return 1
    ip addr add "$NETNS_SUBNET.1/24" dev "$NETNS_TAG-br" || return 1
    ip link set "$NETNS_TAG-br" up || return 1
    for h in "${NETNS_HOSTS[@]}"; do
        ns="$NETNS_TAG-$h"
        ip netns add "$ns" || return 1
        ip link add "$NETNS_TAG-$i" type veth peer name eth0 netns "$ns" || return 1
        ip link set "$NETNS_TAG-$i" master "$NETNS_TAG-br" up || return 1
        ip -n "$ns" addr add "$NETNS_SUBNET.$i/24" dev eth0 || return 1
        ip -n "$ns" link set eth0 up || return 1
        ip -n "$ns" link set lo up || return 1
        NETNS_ADDR[$h]="$NETNS_SUBNET.$i"
        NETNS_VETH[$h]="$NETNS_TAG-$i"
        i=$((i + 1))
    done
}

netns_down() {
    local h
    [[ -n $NETNS_TAG ]] || return 0
    for h in "${NETNS_HOSTS[@]}"; do ip netns del "$NETNS_TAG-$h" 2>/dev/null || true; done
    ip link del "$NETNS_TAG-br" 2>/dev/null || true
    NETNS_TAG=""
    return 0
}

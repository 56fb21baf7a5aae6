#!/usr/bin/env bash
# Installs what zdist needs to build, test and run, from Debian 12's packages.
#   install-deps.sh            everything: build, run, and every test's tools
#   install-deps.sh --build    what building needs, no more (an image's build stage)
#   install-deps.sh --runtime  the shared libraries the daemons load (an image's final stage)
set -euo pipefail

build_packages=(
    build-essential cmake pkg-config
    libzmq3-dev libczmq-dev
    libprotobuf-c-dev protobuf-c-compiler
    libjansson-dev libcunit1-dev libsystemd-dev
    libopenblas-dev zlib1g-dev libmicrohttpd-dev
)
runtime_packages=(
    libzmq5 libczmq4 libprotobuf-c1 libjansson4 libsystemd0
    libmicrohttpd12 libopenblas0 zlib1g
)

packages=(
    build-essential cmake pkg-config
    libzmq3-dev libczmq-dev
    libprotobuf-c-dev protobuf-c-compiler
    libjansson-dev libcunit1-dev libsystemd-dev
    libopenblas-dev zlib1g-dev
    python3
    openmpi-bin libopenmpi-dev
    dataset-fashion-mnist
    # ctest -R systemd boots a throwaway systemd (tests/systemd/sandbox.sh)
    debootstrap systemd-container
    # --http: /metrics and the coordinator's dashboard
    libmicrohttpd-dev
    # ctest -R metrics: promtool check metrics, and a real Prometheus scraping
    # the daemons (about 96 MB installed, with its web UI's JavaScript)
    prometheus
    # ctest -R dashboard: the page loaded in headless Chromium (about 360 MB
    # installed with chromium-common; the test skips, saying so, without it)
    chromium
)

case "${1:-}" in
--build) packages=("${build_packages[@]}") ;;
--runtime) packages=("${runtime_packages[@]}") ;;
"") ;;
*)
    echo "usage: install-deps.sh [--build | --runtime]" >&2
    exit 2
    ;;
esac

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    echo "install-deps: all ${#packages[@]} packages present"
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing ${missing[*]}; run as root (or with sudo) to install them" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"

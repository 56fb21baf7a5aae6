#!/usr/bin/env bash
# Installs dependencies, builds with AddressSanitizer + UndefinedBehaviorSanitizer
# and -Werror, and runs every test (ctest). Usage: scripts/test.sh [ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
build=${ZDIST_TEST_BUILD_DIR:-build-test}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DASAN=ON -DUBSAN=ON -DWERROR=ON -DZDIST_TEST_HOOKS=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
# Leaks are reported by ASAN at exit of every test binary and daemon.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
ctest --output-on-failure --timeout 600 "$@"

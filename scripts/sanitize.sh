#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer: builds ./build-san with clang 16 (GPT_SANITIZE=ON, and
# GPT_FUZZ=ON so scripts/fuzz.sh reuses the same build) and runs the test suite in it. Any ASan or UBSan
# report fails the test that caused it. --build-only stops after building.
# The whole suite runs, the crash/kill/signal tests included (their child gpt-train is instrumented too);
# GPT_SANITIZE_EXCLUDE, a ctest -E regex, leaves tests out when time is short.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-san"
"$root/scripts/install_fuzz_deps.sh"
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_C_COMPILER=clang-16 -DGPT_CUDA=OFF -DGPT_SANITIZE=ON -DGPT_FUZZ=ON > "$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)"
[ "${1:-}" = "--build-only" ] && exit 0

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 900 ${GPT_SANITIZE_EXCLUDE:+-E "$GPT_SANITIZE_EXCLUDE"}

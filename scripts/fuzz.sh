#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for GPT_FUZZ_SECONDS (default 20) each, two at a time, from a
# working copy of its seed corpus (build-san/fuzz-corpus/<target>; new inputs collect there, not in the
# source tree). A crash, leak, UB report or timeout fails the script and leaves the input in
# build-san/fuzz-artifacts/<target>/: add it to tests/fuzz/<target>/ (gpt_tests then replays it in every
# build) and fix the bug. Builds the fuzz targets in build-san first (scripts/sanitize.sh --build-only).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${GPT_SANITIZE_BUILD_DIR:-$root/build-san}"
seconds="${GPT_FUZZ_SECONDS:-20}"
targets=(config_loader token_shard checkpoint byte_tokenizer safetensors gpt2_tokenizer)
GPT_SANITIZE_TARGETS="${targets[*]/#/fuzz_}" "$root/scripts/sanitize.sh" --build-only
# Reports name functions, files and lines: clang 16's runtime looks for llvm-symbolizer-16 (install_fuzz_deps.sh).
export ASAN_SYMBOLIZER_PATH="${ASAN_SYMBOLIZER_PATH:-/usr/lib/llvm-16/bin/llvm-symbolizer}"
export UBSAN_SYMBOLIZER_PATH="${UBSAN_SYMBOLIZER_PATH:-$ASAN_SYMBOLIZER_PATH}"
# Each input is independent, so ASan's quarantine of freed memory (what catches a use after free) needs to
# span one input, not the default 256 MB of the inputs before it: that, and the allocator keeping its
# high-water mark per size class, is what grew a target's RSS from 50 MB to 455 MB in a minute (about 1 GB
# in six), with no state kept between inputs (with the quarantine off, RSS stayed at 63-70 MB).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:quarantine_size_mb=16}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

run_one() {
  local target=$1 corpus="$build/fuzz-corpus/$1" artifacts="$build/fuzz-artifacts/$1"
  mkdir -p "$corpus" "$artifacts"
  cp "$root/tests/fuzz/$target"/* "$corpus/"
  if "$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" > "$build/fuzz-$target.log" 2>&1; then
    echo "fuzz_$target: $(grep -m1 -o 'number_of_executed_units: *[0-9]*' "$build/fuzz-$target.log" |
      grep -o '[0-9]*$') executions in ${seconds}s, no failure"
  else
    tail -n 60 "$build/fuzz-$target.log"
    echo "fuzz_$target FAILED: the input is in $artifacts/; add it to tests/fuzz/$target/ and fix the bug"
    return 1
  fi
}

failed=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  pids=()
  for t in "${targets[@]:i:2}"; do run_one "$t" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
done
exit $failed

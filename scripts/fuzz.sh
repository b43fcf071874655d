#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for SECONDS each (scripts/fuzz.sh [SECONDS]; default
# GPT_FUZZ_SECONDS, else 20), two at a time, from a working copy of its seed corpus
# (build-san/fuzz-corpus/<target>; new inputs collect there, not in the source tree), and ends with a table
# of executions, executions/s, coverage (libFuzzer's cov: and ft: counters), peak RSS and findings per
# target. A crash, leak, UB report or timeout fails the script and leaves the input in
# build-san/fuzz-artifacts/<target>/: add it to tests/fuzz/<target>/ (gpt_tests then replays it in every
# build) and fix the bug. Builds the fuzz targets in build-san first (scripts/sanitize.sh --build-only).
# Two targets share the machine at a time, so a campaign's rates are those of half the cores each.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${GPT_SANITIZE_BUILD_DIR:-$root/build-san}"
seconds="${1:-${GPT_FUZZ_SECONDS:-20}}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS per target], got '$seconds'" >&2; exit 2; }
targets=(config_loader token_shard checkpoint byte_tokenizer safetensors gpt2_tokenizer)
GPT_SANITIZE_TARGETS="${targets[*]/#/fuzz_}" "$root/scripts/sanitize.sh" --build-only
# The checkpoint target's whole-directory mode writes a manifest per input into a scratch directory under
# TMPDIR; on tmpfs that cost 12-15% less CPU per execution than on ext4 (interleaved, load 6).
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
# Reports name functions, files and lines: clang 16's runtime looks for llvm-symbolizer-16 (install_fuzz_deps.sh).
export ASAN_SYMBOLIZER_PATH="${ASAN_SYMBOLIZER_PATH:-/usr/lib/llvm-16/bin/llvm-symbolizer}"
export UBSAN_SYMBOLIZER_PATH="${UBSAN_SYMBOLIZER_PATH:-$ASAN_SYMBOLIZER_PATH}"
# Each input is independent, so ASan's quarantine of freed memory (what catches a use after free) needs to
# span one input, not the default 256 MB of the inputs before it: that, and the allocator keeping its
# high-water mark per size class, is what grew a target's RSS from 50 MB to 455 MB in a minute (about 1 GB
# in six), with no state kept between inputs (with the quarantine off, RSS stayed at 63-70 MB).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:quarantine_size_mb=16}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# The numbers of one target's log: executions, executions/s, the final cov: and ft:, peak RSS in MB.
stats_of() {
  local log=$1
  local execs rate cov ft rss
  execs=$(grep -m1 -o 'number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  rate=$(grep -m1 -o 'average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  rss=$(grep -m1 -o 'peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*$' || true)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*$' || true)
  echo "${execs:--} ${rate:--} ${cov:--} ${ft:--} ${rss:--}"
}

run_one() {
  local target=$1 corpus="$build/fuzz-corpus/$1" artifacts="$build/fuzz-artifacts/$1" log="$build/fuzz-$1.log"
  mkdir -p "$corpus" "$artifacts"
  cp "$root/tests/fuzz/$target"/* "$corpus/"
  local status=0 findings=0
  "$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" > "$log" 2>&1 || status=$?
  if ((status != 0)); then
    findings=$(find "$artifacts" -type f | wc -l)
    ((findings > 0)) || findings=1
    tail -n 60 "$log"
    echo "fuzz_$target FAILED: the input is in $artifacts/; add it to tests/fuzz/$target/ and fix the bug"
  fi
  echo "fuzz_$target $(stats_of "$log") $findings" > "$build/fuzz-$target.result"
  return "$status"
}

failed=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  pids=()
  for t in "${targets[@]:i:2}"; do run_one "$t" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
done

echo
echo "fuzzing: ${seconds}s per target, two targets at a time on $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg)"
printf '%-22s %14s %10s %8s %8s %8s %9s\n' target executions exec/s cov ft rss_mb findings
for t in "${targets[@]}"; do
  read -r name execs rate cov ft rss findings < "$build/fuzz-$t.result"
  printf '%-22s %14s %10s %8s %8s %8s %9s\n' "$name" "$execs" "$rate" "$cov" "$ft" "$rss" "$findings"
done
exit $failed

#!/usr/bin/env bash
# Benchmarks of the CPU backend with `gpt-train bench`: the GPT-2 124M shape (configs/gpt2-124m.yaml) and
# the demo model at T=128 (configs/demo.yaml) and at T=1024 (B=2, the same tokens per step). Each run
# first waits, up to GPT_BENCH_MAX_WAIT seconds (default 600), for the 1-minute load average to fall below
# GPT_BENCH_MAX_LOAD (default 1.5): other processes on the cores make every number noisy. Reports go to
# stdout and, as JSON, to $GPT_BENCH_OUT (default build/bench-results/). Extra arguments go to every bench
# call, e.g. scripts/bench.sh --steps 20 --set train.threads=2. BUILD selects the build directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
exe=$build/gpt-train
out=${GPT_BENCH_OUT:-$build/bench-results}
max_load=${GPT_BENCH_MAX_LOAD:-1.5}
max_wait=${GPT_BENCH_MAX_WAIT:-600}
[ -x "$exe" ] || { echo "bench.sh: $exe not found; build first (scripts/build.sh)" >&2; exit 1; }
mkdir -p "$out"

wait_for_quiet() {
  local waited=0 load
  while :; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$load" -v m="$max_load" 'BEGIN { exit !(l < m) }'; then return; fi
    if [ "$waited" -ge "$max_wait" ]; then
      echo "bench.sh: load average still $load after ${max_wait}s; measuring anyway (expect noise)" >&2
      return
    fi
    sleep 15
    waited=$((waited + 15))
  done
}

run() {
  local name=$1 config=$2
  shift 2
  wait_for_quiet
  echo "=== $name"
  "$exe" bench "$root/$config" --json "$out/$name.json" "$@"
  echo
}

run gpt2-124m configs/gpt2-124m.yaml "$@"
run demo configs/demo.yaml "$@"
run demo-t1024 configs/demo.yaml --set model.context_length=1024 --set train.seq_len=1024 --set train.batch_size=2 "$@"

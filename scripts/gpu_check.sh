#!/usr/bin/env bash
# The one command to run on a machine with a GPU: configures for that GPU's architecture, builds gpt-train
# and gpt_cuda_tests (or takes them prebuilt, below), runs the cross-backend op table and the model-level
# CUDA tests on the GPU, then a short benchmark, and ends with one table. Logs go to OUTDIR (default
# ./gpu-check). With no GPU it says so and exits 0 after the CPU-side checks (the tests then skip).
#
#   scripts/gpu_check.sh [OUTDIR]
#   scripts/gpu_check.sh --prepare [ARCH]
#   GPU_CHECK_SKIP=bench,offload scripts/gpu_check.sh [OUTDIR]   (stages left out, of: tests, flash, bench,
#                                                                offload, sample, profile; each logs its seconds)
#
# --prepare is for GPU machines that reach no package registry and have CUDA (nvcc, cuBLASLt, NCCL) but
# none of our other dependencies: run it beforehand on a machine that can build (default ARCH 90: H100,
# H200). It builds gpt-train and gpt_cuda_tests for sm_ARCH, for any x86-64-v3 CPU (AVX2; not
# -march=native, since the GPU machine's CPU is another), and packs them with every shared library they
# load except the C runtime and CUDA's into .gpu-bundle/ (git-ignored), with a checksum of the sources they
# were built from. Carry that folder with the working tree: there gpu_check.sh runs those binaries instead
# of installing and building (minutes of GPU time saved), once it has checked that the sources are the
# same and that every library resolves.
#
# Benchmark rows: GPT-2 124M at T=1024, bf16 and fp8, recompute none/selective/full, at the largest
# micro-batch of BATCHES (below) that fits; and the GPT-2 774M shape in bf16 and fp8 (the fp8 target is
# 1.2x bf16 there); then GPT-2 124M and 774M in bf16 with and without optimizer offload; then decoding
# speed (gpt-train sample with and without the KV cache). Each benchmark row:
# tokens/s, MFU against the GPU's dense BF16 peak (the datasheet figure, named in the table), ms/step, the
# time of the matrix products, of attention and of the other ops, with the share of the measured copy
# bandwidth the other ops reach (their tensors' bytes over their time), the device memory the ledger
# planned, the bytes the run holds and what the device has in use (cudaMemGetInfo, the CUDA context
# included), and whether the activation bytes the first step wrote are the planned ones. Tokens/s, ms/step
# and MFU come from the steps `gpt-train bench` runs with its profiler off, as training queues its ops;
# the op times from its profiled steps, which synchronise around every op to time it. Last, where ncu is
# installed, a hardware-counter profile of the fused attention's three kernels (ncu_flash.txt). Each stage
# runs under a time limit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bundle_dir=$root/.gpu-bundle
# What the binaries are built from: a change to any of these after --prepare makes the bundle stale.
source_paths=(CMakeLists.txt cmake src cuda tests)
# Loaded from the GPU machine, never carried: the C runtime, the driver, and CUDA's libraries (cuBLASLt
# alone is 540 MB), which its toolkit or its Python packages provide. The C++ runtime and cudart travel as
# a fallback, used only where the machine lacks them or has older ones.
system_libs='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libutil|libresolv|libcuda|libcublas|libcublasLt|libnccl)\.so'
fallback_libs='^(libstdc\+\+|libgcc_s|libcudart)\.so'

if [ "${1:-}" = "--prepare" ]; then
  arch=${2:-90}
  nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
  "$root/scripts/install_deps.sh"
  build="$root/build-gpu-bundle"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPT_CUDA=ON -DGPT_CUDA_EMU=OFF -DGPT_NATIVE=OFF \
    -DCMAKE_CXX_FLAGS=-march=x86-64-v3 -DCMAKE_CUDA_ARCHITECTURES="$arch"
  cmake --build "$build" -j "$(nproc)" --target gpt-train gpt_cuda_tests
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/bin" "$stage/lib" "$stage/fallback"
  cp "$build/gpt-train" "$build/tests/gpt_cuda_tests" "$stage/bin/"
  ldd "$stage/bin/gpt-train" "$stage/bin/gpt_cuda_tests" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
    while read -r soname path; do
      if [[ $soname =~ $system_libs ]]; then continue
      elif [[ $soname =~ $fallback_libs ]]; then
        [[ $soname == libcudart* ]] && group=cudart || group=cxx
        mkdir -p "$stage/fallback/$group"
        cp -L "$path" "$stage/fallback/$group/$soname"
      else cp -L "$path" "$stage/lib/$soname"; fi
    done
  # The static check compiles flash_attention.cu there again, so the headers it includes from outside the
  # tree, the C and C++ libraries and CUDA travel too (fmt's).
  "$nvcc" -std=c++17 --expt-relaxed-constexpr -DGPT_WITH_CUDA=1 -I"$root/src" -I"$root/cuda" \
    -gencode "arch=compute_$arch,code=sm_$arch" -M "$root/cuda/kernels/flash_attention.cu" -o "$stage/flash.d"
  mkdir -p "$stage/include"
  tr ' \\' '\n\n' <"$stage/flash.d" | sed -n 's|^/usr/include/\([^/]*\)/.*|\1|p' | sort -u |
    { grep -vxE 'c\+\+|x86_64-linux-gnu|linux|asm.*' || true; } | while read -r dir; do cp -r "/usr/include/$dir" "$stage/include/"; done
  rm "$stage/flash.d"
  rm -rf "$bundle_dir"
  mkdir -p "$bundle_dir"
  (cd "$root" && git ls-files -z -- "${source_paths[@]}" | xargs -0 sha256sum) >"$stage/sources.sha256"
  {
    echo "built for sm_$arch on $(hostname) at $(date -u +%FT%TZ) from commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- || echo ' with uncommitted changes')"
    echo "compilers: $("${CXX:-c++}" --version | head -1); $("$nvcc" --version | tail -1)"
  } >"$stage/manifest.txt"
  XZ_OPT=-T0 tar -C "$stage" -cJf "$bundle_dir/bundle.tar.xz" .
  cat "$stage/manifest.txt"
  echo "libraries packed: $(ls "$stage/lib" | tr '\n' ' ')"
  echo "fallback: $(cd "$stage/fallback" && ls -- */* | tr '\n' ' ')"
  echo "headers for the static check: $(ls "$stage/include" | tr '\n' ' ')"
  du -h "$bundle_dir/bundle.tar.xz"
  exit 0
fi

out="${1:-$root/gpu-check}"
mkdir -p "$out"
log() { echo "gpu_check: $*" | tee -a "$out/summary.txt"; }
: >"$out/summary.txt"

arch=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,memory.total,compute_cap --format=csv,noheader | head -1)
  arch=$(echo "$gpu" | awk -F', ' '{gsub(/\./, "", $3); print $3}')
  log "GPU: $gpu"
else
  log "no GPU visible (nvidia-smi absent or failing): building and running the CPU-side checks only"
fi

unresolved() { ldd "$gpt_train" "$cuda_tests" 2>&1 | grep -E 'not found|error' | sort -u || true; }
if [ -f "$bundle_dir/bundle.tar.xz" ]; then
  # Prebuilt binaries (--prepare): unpacked outside the tree; CUDA's libraries from wherever the machine
  # keeps them (its toolkit, or the nvidia-* Python packages that PyTorch brings).
  unpacked=$(mktemp -d)
  tar -C "$unpacked" -xJf "$bundle_dir/bundle.tar.xz"
  log "prebuilt: $(head -1 "$unpacked/manifest.txt")"
  if ! (cd "$root" && sha256sum --quiet -c "$unpacked/sources.sha256") >"$out/stale.txt" 2>&1; then
    log "the carried binaries were built from other sources than this tree's (see stale.txt); run scripts/gpu_check.sh --prepare again"
    exit 1
  fi
  if [ -n "$arch" ] && ! grep -q "for sm_$arch " "$unpacked/manifest.txt"; then
    log "the carried binaries are not built for this GPU (sm_$arch); run scripts/gpu_check.sh --prepare $arch"
    exit 1
  fi
  gpt_train=$unpacked/bin/gpt-train
  cuda_tests=$unpacked/bin/gpt_cuda_tests
  export CPATH="$unpacked/include${CPATH:+:$CPATH}"
  cuda_dirs=""
  for lib in libcublasLt.so.13 libnccl.so.2 libcudart.so.13; do
    found=$(find /usr/local/cuda*/ /usr/local/nvidia /usr/lib /opt -name "$lib" 2>/dev/null | head -1 || true)
    [ -n "$found" ] && cuda_dirs="$cuda_dirs:$(dirname "$found")"
  done
  export LD_LIBRARY_PATH="$unpacked/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # A directory on LD_LIBRARY_PATH comes before the system's, so each fallback joins only when needed:
  # cudart where the machine has none, our C++ runtime where the machine's is older than the one we built with.
  missing=$(unresolved)
  if grep -q libcudart <<<"$missing"; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$unpacked/fallback/cudart"
    log "cudart: the machine has none; using the carried one"
  fi
  if grep -qE 'GLIBCXX|CXXABI|GCC_|libstdc|libgcc_s' <<<"$missing"; then
    export LD_LIBRARY_PATH="$unpacked/fallback/cxx:$LD_LIBRARY_PATH"
    log "C++ runtime: the machine's is older than the build's; using the carried one"
  fi
  missing=$(unresolved)
  if [ -n "$missing" ]; then
    log "libraries that do not resolve on this machine: $(tr -s ' \t\n' ' ' <<<"$missing")"
    exit 1
  fi
  log "libraries: $(ldd "$gpt_train" | grep -E 'libcublasLt|libnccl|libcudart|libstdc' | awk '{print $3}' | tr '\n' ' ')"
else
  # Dependencies from Debian's packages, then a build for this GPU's architecture.
  if ! "$root/scripts/install_deps.sh" >"$out/install.log" 2>&1; then
    log "dependencies: install_deps.sh failed (see install.log); on a machine without a package registry, carry the binaries that scripts/gpu_check.sh --prepare makes"
    exit 1
  fi
  build="$root/build-gpu"
  cmake_args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPT_CUDA=ON -DGPT_CUDA_EMU=OFF)
  [ -n "$arch" ] && cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES="$arch")
  start=$(date +%s)
  cmake "${cmake_args[@]}" >"$out/configure.log" 2>&1 || { log "configure failed: see configure.log"; tail -20 "$out/configure.log"; exit 1; }
  cmake --build "$build" -j "$(nproc)" --target gpt-train gpt_cuda_tests >"$out/build.log" 2>&1 ||
    { log "build failed: see build.log"; grep -m5 -B2 -A8 'error' "$out/build.log" || tail -30 "$out/build.log"; exit 1; }
  log "built for sm_${arch:-(default architectures)} in $(( $(date +%s) - start )) s"
  gpt_train=$build/gpt-train
  cuda_tests=$build/tests/gpt_cuda_tests
fi

"$gpt_train" info | tee "$out/info.txt"

tests_status=0
# Each stage runs under a time limit, so that a hang costs that stage and not the rest of the check.
limited() { local seconds=$1; shift; timeout --kill-after=10 "$seconds" "$@"; }
# GPU_CHECK_SKIP names stages to leave out, so that a short lease can split the check over two runs.
skipped() { [[ ",${GPU_CHECK_SKIP:-}," == *",$1,"* ]] && log "$1: skipped (GPU_CHECK_SKIP)"; }
stage_start=$SECONDS
took() { log "$1 took $((SECONDS - stage_start)) s"; stage_start=$SECONDS; }
if ! skipped tests; then
  limited 360 "$cuda_tests" --gtest_brief=1 2>&1 | tee "$out/cuda_tests.log" | grep -E '^\[  (PASSED|FAILED|SKIPPED) |op table|^  [a-z0-9 ]+ +[0-9]|CUDA vs CPU|trainer |cached against ' || true
  grep -q '^\[  FAILED  \]' "$out/cuda_tests.log" && tests_status=1
  grep -q '^\[  PASSED  \]' "$out/cuda_tests.log" || { tests_status=1; log "gpt_cuda_tests did not finish (crashed, or stopped after 360 s): see cuda_tests.log"; }
  log "op table and model-level tests: $(grep -E '^\[  PASSED  \]|tests ran' "$out/cuda_tests.log" | tail -1)"
  took tests
fi

if [ -z "$arch" ]; then
  log "no GPU: skipped the benchmark"
  exit "$tests_status"
fi

# The fused attention alone: TFLOP/s forward and backward, causal (FLOPs counted as half the square),
# BF16, head sizes 64 and 128, T = 1024, 4096, 8192, and FP32 (the tiled kernels) at T = 1024 and 4096
# (tests/cuda/backend/bench_flash_attention.cpp); and its
# static checks (no register spills; HMMA, LDSM, LDGSTS in the SASS) for this GPU's architecture.
if ! skipped flash; then
  GPT_FLASH_BENCH=1 limited 180 "$cuda_tests" --gtest_filter='CudaFlashBenchmark.*' >"$out/flash_bench.log" 2>&1 ||
    tests_status=1
  grep '^flash attention' "$out/flash_bench.log" | tee -a "$out/summary.txt" || log "flash attention benchmark: no figures (see flash_bench.log)"
  limited 240 "$root/scripts/check_flash_kernels.sh" "$arch" >"$out/flash_static.log" 2>&1 || tests_status=1
  log "flash attention static checks (sm_$arch): $(tail -1 "$out/flash_static.log")"
  took flash
fi

# The datasheet's dense (no sparsity) BF16 tensor-core peak of the GPU, for MFU.
gpu_name=$(echo "$gpu" | cut -d, -f1)
case "$gpu_name" in
  *H200*|*H100*SXM*|*"H100 80GB HBM3"*) peak_tflops=989 ;;
  *H100*PCIe*|*H100*) peak_tflops=756 ;;
  *A100*) peak_tflops=312 ;;
  *L40S*) peak_tflops=362 ;;
  *L4*) peak_tflops=121 ;;
  *4090*) peak_tflops=165 ;;
  *) peak_tflops=0 ;;
esac

field() { sed -n "s/.*\"$2\":\\([^,}]*\\).*/\\1/p" "$1" | tr -d '"'; }

data_flags=(--set data.train=/nonexistent/train_*.bin --set data.val= --set train.seq_len=1024 --set train.eval_every=0)
rows=()
bench_row() {  # name size(124m|774m) recipe recompute batch...
  local name=$1 size=$2 recipe=$3 recompute=$4
  shift 4
  local shape=()
  [ "$size" = 774m ] && shape=(--set model.n_layer=36 --set model.n_head=20 --set model.n_embd=1280)
  for b in "$@"; do
    local json="$out/bench_${name// /_}_b$b.json"
    if limited 150 "$gpt_train" bench "$root/configs/gpt2-124m.yaml" "${shape[@]}" --steps 10 --warmup 3 --peak-reps 0 --json "$json" "${data_flags[@]}" \
         --set train.backend=cuda --set train.batch_size="$b" --set precision.recipe="$recipe" \
         --set recompute.mode="$recompute" >"$out/bench_${name// /_}_b$b.log" 2>&1; then
      local tps ms gflop mm att rest rest_bw planned held used acts mfu
      # The headline is the steps bench ran without a synchronize() around each op (the rate training runs at);
      # the op times beside it come from the synchronised ones.
      tps=$(field "$json" tokens_per_s_unprofiled); ms=$(field "$json" ms_per_step_unprofiled)
      gflop=$(field "$json" model_gflop_per_step)
      mm=$(field "$json" ms_matmul); att=$(field "$json" ms_attention); rest=$(field "$json" ms_memory_bound)
      # The other ops' traffic over their time, against the copy bandwidth the bench measured.
      rest_bw=$(awk -v mb="$(field "$json" mb_memory_bound)" -v t="$rest" -v bw="$(field "$json" bandwidth_gbs)" \
                  'BEGIN { if (t > 0 && bw > 0) printf "%.0f%%", 100 * mb / t / bw; else print "n/a" }')
      planned=$(field "$json" planned_device_bytes); held=$(field "$json" held_device_bytes); used=$(field "$json" used_device_bytes)
      acts=equal
      [ "$(field "$json" planned_activation_bytes)" = "$(field "$json" measured_activation_bytes)" ] || acts=DIFFERENT
      mfu=$(awk -v g="$gflop" -v ms="$ms" -v p="$peak_tflops" 'BEGIN { if (p > 0) printf "%.1f%%", 100 * g / (ms / 1000) / (p * 1000); else print "n/a" }')
      rows+=("$(printf '%-28s %4s %10.0f %7s %9.1f %8.1f %8.1f %8.1f %6s %9.2f %9.2f %9.2f %9s' "$name" "$b" "$tps" "$mfu" "$ms" "$mm" "$att" "$rest" "$rest_bw" \
                 "$(awk -v x="$planned" 'BEGIN{print x/2^30}')" "$(awk -v x="${held:-0}" 'BEGIN{print x/2^30}')" \
                 "$(awk -v x="${used:-0}" 'BEGIN{print x/2^30}')" "$acts")")
      return 0
    fi
    grep -qi 'memory' "$out/bench_${name// /_}_b$b.log" || { rows+=("$(printf '%-28s %4s failed: see bench_%s_b%s.log' "$name" "$b" "${name// /_}" "$b")"); return 0; }
  done
  rows+=("$(printf '%-28s  no batch of %s fits' "$name" "$*")")
}

if ! skipped bench; then
  for recompute in none selective full; do
    for recipe in bf16 fp8; do
      bench_row "124M $recipe $recompute" 124m "$recipe" "$recompute" 32 16 8
    done
  done
  for recipe in bf16 fp8; do
    bench_row "774M $recipe none" 774m "$recipe" none 16 8 4
  done
  took bench
fi

# Optimizer offload (memory.offload: optimizer): the same bf16 step with AdamW on the GPU and on the host, and the
# share of the offloaded step the GPU waits for the host (from the norm until the last unit's weights are queued
# back: the bench's ms_host_optimizer over its ms_per_step), and the host AdamW's part of it (ms_host_adamw).
offload_rows=()
offload_row() {  # name size(124m|774m) batch
  local name=$1 size=$2 b=$3 shape=() ms=() share="n/a" adamw="n/a"
  [ "$size" = 774m ] && shape=(--set model.n_layer=36 --set model.n_head=20 --set model.n_embd=1280)
  for offload in none optimizer; do
    local json="$out/bench_offload_${size}_${offload}.json"
    if limited 180 "$gpt_train" bench "$root/configs/gpt2-124m.yaml" "${shape[@]}" --steps 5 --warmup 2 --peak-reps 0 --json "$json" \
         "${data_flags[@]}" --set train.backend=cuda --set train.batch_size="$b" --set precision.recipe=bf16 \
         --set memory.offload="$offload" >"$out/bench_offload_${size}_${offload}.log" 2>&1; then
      # The step times without the profiler's synchronisation; the wait's share from the profiled steps it
      # was measured in.
      ms+=("$(field "$json" ms_per_step_unprofiled)")
      [ "$offload" = optimizer ] &&
        share=$(awk -v h="$(field "$json" ms_host_optimizer)" -v s="$(field "$json" ms_per_step)" 'BEGIN { printf "%.0f%%", 100 * h / s }') &&
        adamw=$(field "$json" ms_host_adamw)
    else
      ms+=("failed")
    fi
  done
  offload_rows+=("$(printf '%-20s %4s %14s %14s %12s %14s' "$name" "$b" "${ms[0]}" "${ms[1]}" "$share" "$adamw")")
}
if ! skipped offload; then
  offload_row "124M bf16" 124m 8
  offload_row "774M bf16" 774m 4
  took offload
fi

# Decoding: `gpt-train sample` on the GPT-2 124M shape (trained one step on a byte corpus, so the weights are
# near their initialisation and the text is noise: the speed is what this measures), 200 tokens after a
# 6-byte prompt, with the KV cache in fp32 and bf16 and without it in bf16: tokens/s as sample reports it.
sample_rows=()
if ! skipped sample; then
  decode=$(mktemp -d)
  yes "In the beginning God created the heaven and the earth." | head -c 1000000 >"$decode/corpus.txt"
  if "$gpt_train" prepare --input "$decode/corpus.txt" --out "$decode/data" --tokenizer byte >"$out/sample_prepare.log" 2>&1 &&
     limited 120 "$gpt_train" train "$root/configs/gpt2-124m.yaml" --set "data.train=$decode/data/train_*.bin" --set data.val= \
       --set data.tokenizer=byte --set train.backend=cuda --set train.steps=1 --set train.batch_size=1 \
       --set train.seq_len=1024 --set train.eval_every=0 --set train.sample_every=0 --set "log.run_dir=$decode/run" \
       >"$out/sample_train.log" 2>&1; then
    for variant in "fp32" "bf16" "bf16 --no-cache"; do
      read -r recipe flag <<<"$variant"
      rate=$(limited 90 "$gpt_train" sample "$decode/run" --backend cuda --max-tokens 200 --recipe "$recipe" ${flag:+"$flag"} \
               --prompt "In the" 2>&1 | tee -a "$out/sample.log" | sed -n 's/.*: \([0-9.]*\) tokens\/s.*/\1/p' | tail -1)
      sample_rows+=("$(printf '%-20s %12s' "$variant" "${rate:-failed}")")
    done
  else
    sample_rows+=("no checkpoint to sample (see sample_prepare.log, sample_train.log)")
  fi
  rm -rf "$decode"
  took sample
fi

{
  echo
  echo "gpu_check decoding: gpt-train sample, GPT-2 124M shape, 200 tokens"
  printf '%-20s %12s\n' "recipe" "tokens/s"
  printf '%s\n' "${sample_rows[@]}"
} | tee -a "$out/summary.txt"

{
  echo
  echo "gpu_check offload: ms/step with AdamW on the GPU and offloaded to the host; T=1024"
  printf '%-20s %4s %14s %14s %12s %14s\n' "row" "B" "on GPU ms" "offloaded ms" "GPU waits" "host AdamW ms"
  printf '%s\n' "${offload_rows[@]}"
} | tee -a "$out/summary.txt"

{
  echo
  echo "gpu_check table: $gpu_name, MFU against its dense BF16 peak of ${peak_tflops} TFLOP/s (datasheet); T=1024"
  printf '%-28s %4s %10s %7s %9s %8s %8s %8s %6s %9s %9s %9s %9s\n' "row" "B" "tokens/s" "MFU" "ms/step" "matmul" "attn" "others" "of bw" "dev plan" "dev held" "dev used" "acts"
  printf '%-28s %4s %10s %7s %9s %8s %8s %8s %6s %9s %9s %9s %9s\n' "" "" "" "" "" "ms" "ms" "ms" "" "GiB" "GiB" "GiB" "planned"
  printf '%s\n' "${rows[@]}"
  echo "tokens/s, MFU, ms/step: steps without a synchronize() around each op; matmul, attn, others: the ops' times in"
  echo "the steps that synchronise around each (so their sum exceeds ms/step). others: every op but the matrix products"
  echo "and attention; of bw: their tensors' bytes over their time, against the device-to-device copy bandwidth each"
  echo "bench measured (its log has each op's figure)"
} | tee -a "$out/summary.txt"

# A hardware-counter profile of the fused attention at head size 128, T = 4096, for tuning it later without
# a GPU: the forward's last timed launch and the backward's first dq and dk/dv passes (the benchmark's order:
# 11 forwards, then 11 backwards), with occupancy, pipe use, shared-memory bank conflicts and warp stalls.
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1 || true)
if skipped profile; then
  :
elif [ -n "$ncu" ]; then
  GPT_FLASH_BENCH=1 GPT_FLASH_BENCH_ONLY=128x4096 limited 150 "$ncu" --clock-control none \
    -k 'regex:flash_(forward|backward_dq|backward_dkv)_kernel' --launch-skip 10 --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats \
    "$cuda_tests" --gtest_filter='CudaFlashBenchmark.*' >"$out/ncu_flash.txt" 2>&1 &&
    log "fused attention profile (ncu, hs 128, T 4096): ncu_flash.txt" ||
    log "fused attention profile: ncu failed or ran out of time (see ncu_flash.txt)"
  took profile
else
  log "fused attention profile: no ncu on this machine"
fi
exit "$tests_status"

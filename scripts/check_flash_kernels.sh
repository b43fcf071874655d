#!/usr/bin/env bash
# Static checks of the fused attention's tensor-core kernels (cuda/kernels/flash_attention.cu), no GPU
# needed: nvcc compiles the file for sm_80 and sm_90 with ptxas -v; every kernel must spill nothing (0 bytes
# spill stores and loads) and its SASS (cuobjdump -sass) must hold HMMA instructions, so a change that
# falls off the tensor cores, or out of the registers, fails here rather than in a benchmark. Prints each
# kernel's registers, stack, and HMMA count (and mma.sync count in its PTX). Where the toolkit has no
# cuobjdump (a compiler-only install), the SASS check is reported as not run and the PTX's mma.sync
# instructions are checked instead. ctest runs it in GPU builds (cuda_static.FlashAttentionKernels).
#
#   scripts/check_flash_kernels.sh [ARCH ...]     (default: 80 90)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuobjdump=$(dirname "$nvcc")/cuobjdump
[ -x "$cuobjdump" ] || cuobjdump=$(command -v cuobjdump || true)
[ -x "$nvcc" ] || { echo "check_flash_kernels: no nvcc (set NVCC)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(80 90)
status=0
for arch in "${archs[@]}"; do
  obj=$work/flash_sm$arch.o
  "$nvcc" -std=c++17 -O3 --expt-relaxed-constexpr -DGPT_WITH_CUDA=1 -I"$root/src" -I"$root/cuda" \
    -gencode "arch=compute_$arch,code=sm_$arch" -Xptxas -v --keep --keep-dir "$work" \
    -c "$root/cuda/kernels/flash_attention.cu" -o "$obj" 2>"$work/ptxas_$arch.txt" || { cat "$work/ptxas_$arch.txt"; exit 1; }
  sass_checked=1
  if [ -n "$cuobjdump" ]; then
    "$cuobjdump" -sass "$obj" >"$work/sass_$arch.txt"
  else
    sass_checked=0
    : >"$work/sass_$arch.txt"
    echo "sm_$arch: no cuobjdump in this toolkit: the SASS (HMMA) check is NOT run; the PTX's mma.sync is checked"
  fi
  ptx=$(ls "$work"/*flash_attention*.ptx | head -1)
  # ptxas: "Compiling entry function 'NAME' for 'sm_XX'", then "N bytes stack frame, N bytes spill stores,
  # N bytes spill loads" and "Used N registers"; cuobjdump: "Function : NAME", then its instructions.
  awk -v arch="$arch" -v sass="$work/sass_$arch.txt" -v ptx="$ptx" -v sass_checked="$sass_checked" '
    BEGIN {
      while ((getline line < sass) > 0) {
        if (match(line, /Function : [^ ]+/)) fn = substr(line, RSTART + 11, RLENGTH - 11)
        else if (line ~ /HMMA/) hmma[fn]++
      }
      while ((getline line < ptx) > 0) {
        if (match(line, /\.entry [^ (]+/)) fn = substr(line, RSTART + 7, RLENGTH - 7)
        else if (line ~ /mma\.sync\.aligned\.m16n8k16/) mma[fn]++
      }
    }
    /Compiling entry function/ { split($0, q, "'\''"); fn = q[2] }
    /spill stores/ { stack[fn] = $5 + 0; stores[fn] = $9 + 0; loads[fn] = $13 + 0 }
    /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); regs[fn] = substr($0, RSTART + 5, RLENGTH - 5); order[++n] = fn }
    END {
      bad = 0
      for (i = 1; i <= n; ++i) {
        fn = order[i]
        cmd = "c++filt " fn; cmd | getline name; close(cmd)
        gsub(/\(anonymous namespace\)::/, "", name); sub(/^void gpt::cuda::/, "", name)
        gsub(/\(gpt::cuda::MmaInput\)0/, "bf16", name); gsub(/\(gpt::cuda::MmaInput\)1/, "f16", name); sub(/\(.*/, "", name)
        printf "sm_%s %-40s %3d registers, %4d bytes stack, spill %d/%d bytes, %4s HMMA, %4d mma.sync in PTX\n", arch, name, regs[fn], stack[fn], stores[fn], loads[fn], sass_checked ? hmma[fn] + 0 : "n/a", mma[fn]
        if (stores[fn] > 0 || loads[fn] > 0) { print "  FAIL: spills registers"; bad = 1 }
        if (sass_checked && hmma[fn] == 0) { print "  FAIL: no tensor-core (HMMA) instruction in the SASS"; bad = 1 }
        if (mma[fn] == 0) { print "  FAIL: no mma.sync in the PTX"; bad = 1 }
      }
      if (n < 12) { printf "  FAIL: %d kernels found, expected 12 (3 kernels x head sizes 64, 128 x BF16, F16)\n", n; bad = 1 }
      exit bad
    }' "$work/ptxas_$arch.txt" || status=1
done
if [ $status -ne 0 ]; then echo "check_flash_kernels: FAILED"
elif [ -n "$cuobjdump" ]; then echo "check_flash_kernels: no spills, HMMA in every kernel's SASS"
else echo "check_flash_kernels: no spills, mma.sync in every kernel's PTX (SASS not checked: no cuobjdump)"; fi
exit $status

#!/usr/bin/env bash
# Static check that every CUDA kernel can be launched with the block size it allows, no GPU needed: a
# launch whose block needs more registers than a block may have fails on the GPU with "too many resources
# requested for launch", a failure the emulator cannot show (it runs the kernels as host code and knows no
# register counts). nvcc compiles every kernel source (cuda/kernels, cuda/gemm, cuda/common) for each
# architecture to an uncompressed fatbin holding its PTX and cubin (tests/cuda/static/fatbin_split.cpp
# takes them apart), with ptxas -v; for each kernel
#  - the block size it allows: the product of the PTX's .maxntid (__launch_bounds__), or 1024 (any block)
#    for a kernel without one;
#  - its registers (ptxas -v), allocated as the GPU allocates them: per warp, in units of 256;
# and it fails where that block needs more than the 65,536 registers a block may have on sm_75 to sm_90
# (so a kernel without __launch_bounds__ must fit 64 registers a thread; one that needs more says how
# big its blocks are). Prints each kernel's figures, its spills among them: a few kernels spill 4 to 20
# bytes with registers to spare (around the calls of double-precision and conversion routines, whose ABI
# saves registers on the stack); the fused attention's kernels, where a spill would cost, must have none
# (scripts/check_flash_kernels.sh). ctest runs it in GPU builds (cuda_static.LaunchResources) through
# GPT_COMPILER_CACHE, as scripts/check_flash_kernels.sh does, whose compile of flash_attention.cu this one
# repeats flag for flag, so the cache serves it to both.
#
#   scripts/check_launch_resources.sh [ARCH ...]     (default: 80 90)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "check_launch_resources: no nvcc (set NVCC)"; exit 1; }
command -v c++filt >/dev/null || { echo "check_launch_resources: no c++filt (binutils)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(80 90)


split=$work/fatbin_split
"${CXX:-c++}" -std=c++17 -O1 -o "$split" "$root/tests/cuda/static/fatbin_split.cpp"
source "$root/scripts/kernel_check_common.sh"
status=0
kernels=0 spilling=0
for arch in "${archs[@]}"; do
  for cu in "$root"/cuda/kernels/*.cu "$root"/cuda/gemm/*.cu "$root"/cuda/common/*.cu; do
    name=$(basename "$cu" .cu)
    dir=$work/$arch/$name
    mkdir -p "$dir"
    cached_nvcc "${kernel_flags[@]}" -gencode "arch=compute_$arch,code=[sm_$arch,compute_$arch]" -Xfatbin=-compress=false \
      -c -fatbin -o "$dir/$name.fatbin" "$cu" 2>"$dir/ptxas.txt" || { cat "$dir/ptxas.txt"; exit 1; }
    "$split" "$dir/$name.fatbin" "$dir" >/dev/null
    # ptxas's figures (kernel_check_common.sh's rules); the PTX's ".entry NAME(" and, before its body,
    # ".maxntid X, Y, Z".
    awk -v arch="$arch" -v file="$name" -v ptx="$dir/compute_$arch.ptx" '
      BEGIN {
        while ((getline line < ptx) > 0) {
          if (match(line, /\.entry [^ (]+/)) fn = substr(line, RSTART + 7, RLENGTH - 7)
          else if (match(line, /\.maxntid [0-9]+, *[0-9]+, *[0-9]+/)) {
            split(substr(line, RSTART + 9, RLENGTH - 9), d, ",")
            maxntid[fn] = (d[1] + 0) * (d[2] + 0) * (d[3] + 0)
          }
        }
      }
      '"$ptxas_rules"'
      function short_name(fn,   cmd, s) {
        cmd = "c++filt " fn; cmd | getline s; close(cmd)
        gsub(/\(anonymous namespace\)::/, "", s); sub(/^void /, "", s); sub(/^gpt::cuda::/, "", s); sub(/\(.*/, "", s)
        return s
      }
      END {
        bad = 0
        for (i = 1; i <= n; ++i) {
          fn = order[i]
          name = short_name(fn)
          threads = fn in maxntid ? maxntid[fn] : 1024
          warps = int((threads + 31) / 32)
          per_warp = int((regs[fn] * 32 + 255) / 256) * 256
          block_regs = warps * per_warp
          printf "sm_%s %-18s %-52s %3d registers, block of %4d threads%s: %5d registers; spill %d/%d bytes\n", arch, file, \
            substr(name, 1, 52), regs[fn], threads, fn in maxntid ? " (__launch_bounds__)" : " (any: no __launch_bounds__)", \
            block_regs, stores[fn], loads[fn]
          if (block_regs > 65536) {
            printf "  FAIL: a block of %d threads needs %d registers, more than the 65536 a block may have: give the kernel " \
                   "__launch_bounds__ with the block size it is launched with (ptxas then fits its registers to it)\n", \
                   threads, block_regs
            bad = 1
          }
        }
        exit bad
      }' "$dir/ptxas.txt" >"$dir/report.txt" || status=1
    cat "$dir/report.txt"
    kernels=$((kernels + $(grep -c '^sm_' "$dir/report.txt" || true)))
    spilling=$((spilling + $(grep '^sm_' "$dir/report.txt" | grep -vc 'spill 0/0 bytes' || true)))
  done
done
if [ $status -ne 0 ]; then echo "check_launch_resources: FAILED"
else echo "check_launch_resources: $kernels kernels (sm_${archs[*]}) fit their blocks' registers; $spilling of them spill"; fi
exit $status

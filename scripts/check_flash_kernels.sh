#!/usr/bin/env bash
# Static checks of the fused attention's tensor-core kernels (cuda/kernels/flash_attention.cu), no GPU
# needed: nvcc compiles the file for sm_80 and sm_90 with ptxas -v, and for every kernel
#  - registers: no spill stores or loads;
#  - SASS: it holds tensor-core products (HMMA), ldmatrix (LDSM) and cp.async (LDGSTS), and every
#    mma.sync.m16n8k16 of its PTX became one HMMA, every ldmatrix one LDSM, every cp.async one LDGSTS,
# so a change that falls off the tensor cores or off the asynchronous copies, or out of the registers,
# fails here rather than in a benchmark.
# The SASS is read from the cubin by tests/cuda/static/cubin_opcodes.cpp (built here with the host
# compiler), since a compiler-only toolkit has no cuobjdump; its opcode table is first confirmed on
# tests/cuda/static/sass_probe.cu, whose instruction counts are known, and where cuobjdump exists its HMMA
# count must agree. Prints each kernel's registers, stack, spills and the three counts. ctest runs it in GPU
# builds (cuda_static.FlashAttentionKernels). The tiled FP32 kernels (flash_attention_tiled.cu) are
# compiled too and must not spill.
# Each file is compiled once an architecture with ptxas -v, flash_attention.cu to an uncompressed fatbin
# holding its PTX and its cubin (tests/cuda/static/fatbin_split.cpp takes them apart): compiles ccache can
# keep, with their reports, where --keep's cannot. GPT_COMPILER_CACHE (ctest sets it to ccache where the
# build compiles through it) runs nvcc through that cache, so a check of kernels unchanged since the last
# one costs lookups instead of about two minutes of nvcc.
# Below sm_80 (Turing, sm_75: no cp.async, no BF16 mma) the tensor-core kernels' bodies are a trap
# (common/mma.cuh's GPT_HAS_SM80_MMA) and the host never launches them there: the check is then that
# their PTX holds none of those instructions, and the tiled kernels' as above.
#
#   scripts/check_flash_kernels.sh [ARCH ...]     (default: 75 80 90)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuobjdump=$(dirname "$nvcc")/cuobjdump
[ -x "$cuobjdump" ] || cuobjdump=$(command -v cuobjdump || true)
[ -x "$nvcc" ] || { echo "check_flash_kernels: no nvcc (set NVCC)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(75 80 90)
opcodes=$work/cubin_opcodes split=$work/fatbin_split
"${CXX:-c++}" -std=c++17 -O1 -o "$opcodes" "$root/tests/cuda/static/cubin_opcodes.cpp"
"${CXX:-c++}" -std=c++17 -O1 -o "$split" "$root/tests/cuda/static/fatbin_split.cpp"
source "$root/scripts/kernel_check_common.sh"
# A kernel's name demangled, without namespaces and parameters (MmaInput 0/1 as bf16/f16, the D pass's
# true as D), for the rules' figures.
ptxas_rules+=$(cat <<'EOF'

    function kernel_name(fn,   cmd, name) {
      cmd = "c++filt " fn; cmd | getline name; close(cmd)
      gsub(/\(anonymous namespace\)::/, "", name); sub(/^void gpt::cuda::/, "", name)
      gsub(/\(gpt::cuda::MmaInput\)0/, "bf16", name); gsub(/\(gpt::cuda::MmaInput\)1/, "f16", name); sub(/\(.*/, "", name)
      sub(/, false>/, ">", name); sub(/, true>/, ", D>", name)
      return name
    }
EOF
)
status=0
below_sm80=""
for arch in "${archs[@]}"; do
  gencode=(-gencode "arch=compute_$arch,code=sm_$arch")
  if [ "$arch" -ge 80 ]; then
    cached_nvcc -std=c++17 "${gencode[@]}" -c -cubin -o "$work/probe.cubin" "$root/tests/cuda/static/sass_probe.cu"
    probe=$("$opcodes" "$work/probe.cubin" | sed -E 's/^\S+(sass_probe_[a-z]+)\S* instructions [0-9]+/\1/' | sort | tr '\n' ';')
    if [ "$probe" != "sass_probe_counted HMMA 2 LDSM 3 LDGSTS 4;sass_probe_none HMMA 0 LDSM 0 LDGSTS 0;" ]; then
      echo "sm_$arch: FAIL: cubin_opcodes's opcode table does not hold for this toolkit: on sass_probe.cu it counted"
      echo "  '$probe' where the kernels hold HMMA 2 LDSM 3 LDGSTS 4 and none"
      status=1
      continue
    fi
  fi
  cached_nvcc "${kernel_flags[@]}" -gencode "arch=compute_$arch,code=[sm_$arch,compute_$arch]" -Xfatbin=-compress=false \
    -c -fatbin -o "$work/flash_$arch.fatbin" "$root/cuda/kernels/flash_attention.cu" 2>"$work/ptxas_$arch.txt" ||
    { cat "$work/ptxas_$arch.txt"; exit 1; }
  "$split" "$work/flash_$arch.fatbin" "$work" >/dev/null
  ptx=$work/compute_$arch.ptx cubin=$work/sm_$arch.cubin
  if [ "$arch" -lt 80 ]; then
    # Below sm_80: no spills, and no cp.async, ldmatrix or mma in the PTX (ptxas would refuse those
    # instructions; this names the kernel).
    below_sm80="; below sm_80 no cp.async, ldmatrix or mma in their PTX"
    awk -v arch="$arch" -v ptx="$ptx" '
      BEGIN {
        while ((getline line < ptx) > 0) {
          if (match(line, /\.entry [^ (]+/)) fn = substr(line, RSTART + 7, RLENGTH - 7)
          else if (line ~ /mma\.sync|ldmatrix|cp\.async/) sm80[fn]++
        }
      }
      '"$ptxas_rules"'
      END {
        bad = 0
        for (i = 1; i <= n; ++i) {
          fn = order[i]
          printf "sm_%s %-40s %3d registers, %4d bytes stack, spill %d/%d bytes; PTX: %d sm_80 instructions (body: a trap)\n", \
            arch, kernel_name(fn), regs[fn], stack[fn], stores[fn], loads[fn], sm80[fn]
          if (stores[fn] > 0 || loads[fn] > 0) { print "  FAIL: spills registers"; bad = 1 }
          if (sm80[fn] + 0 > 0) { print "  FAIL: cp.async, ldmatrix or mma in code for a device without them (GPT_HAS_SM80_MMA guard missing)"; bad = 1 }
        }
        if (n < 16) { printf "  FAIL: %d kernels found, expected 16 (forward, dq, D, dk/dv x head sizes 64, 128 x BF16, F16)\n", n; bad = 1 }
        exit bad
      }' "$work/ptxas_$arch.txt" || status=1
  else
    "$opcodes" "$cubin" >"$work/sass_$arch.txt"
    : >"$work/cuobjdump_$arch.txt"
    [ -z "$cuobjdump" ] || "$cuobjdump" -sass "$cubin" >"$work/cuobjdump_$arch.txt"
    # cubin_opcodes: "NAME instructions N HMMA n LDSM n LDGSTS n"; cuobjdump: "Function : NAME", then its
    # instructions.
    awk -v arch="$arch" -v sass="$work/sass_$arch.txt" -v ptx="$ptx" \
        -v dump="$work/cuobjdump_$arch.txt" -v dumped="${cuobjdump:+1}" '
      BEGIN {
        while ((getline line < sass) > 0) { split(line, f, " "); hmma[f[1]] = f[5]; ldsm[f[1]] = f[7]; ldgsts[f[1]] = f[9] }
        while ((getline line < ptx) > 0) {
          if (match(line, /\.entry [^ (]+/)) fn = substr(line, RSTART + 7, RLENGTH - 7)
          else if (line ~ /mma\.sync\.aligned\.m16n8k16/) mma[fn]++
          else if (line ~ /ldmatrix\.sync/) ldmatrix[fn]++
          else if (line ~ /cp\.async\.c[ag]\.shared\.global/) cp_async[fn]++
        }
        while ((getline line < dump) > 0) {
          if (match(line, /Function : [^ ]+/)) fn = substr(line, RSTART + 11, RLENGTH - 11)
          else if (line ~ /HMMA/) dumped_hmma[fn]++
        }
      }
      '"$ptxas_rules"'
      END {
        bad = 0
        for (i = 1; i <= n; ++i) {
          fn = order[i]
          name = kernel_name(fn)
          printf "sm_%s %-40s %3d registers, %4d bytes stack, spill %d/%d bytes; SASS (PTX): %3d (%3d) HMMA, %3d (%3d) LDSM, %3d (%3d) LDGSTS\n", \
            arch, name, regs[fn], stack[fn], stores[fn], loads[fn], hmma[fn], mma[fn], ldsm[fn], ldmatrix[fn], ldgsts[fn], cp_async[fn]
          if (stores[fn] > 0 || loads[fn] > 0) { print "  FAIL: spills registers"; bad = 1 }
          if (hmma[fn] + 0 == 0) { print "  FAIL: no tensor-core (HMMA) instruction in the SASS"; bad = 1 }
          if (ldsm[fn] + 0 == 0) { print "  FAIL: no ldmatrix (LDSM) in the SASS: the tensor-core operands do not come from shared memory by ldmatrix"; bad = 1 }
          if (ldgsts[fn] + 0 == 0) { print "  FAIL: no cp.async (LDGSTS) in the SASS: the tiles do not load asynchronously"; bad = 1 }
          if (hmma[fn] != mma[fn] + 0) { print "  FAIL: the SASS does not hold one HMMA for each mma.sync of the PTX"; bad = 1 }
          if (ldsm[fn] != ldmatrix[fn] + 0) { print "  FAIL: the SASS does not hold one LDSM for each ldmatrix of the PTX"; bad = 1 }
          if (ldgsts[fn] != cp_async[fn] + 0) { print "  FAIL: the SASS does not hold one LDGSTS for each cp.async of the PTX"; bad = 1 }
          if (dumped && dumped_hmma[fn] != hmma[fn]) { printf "  FAIL: cuobjdump shows %d HMMA, cubin_opcodes counted %d\n", dumped_hmma[fn], hmma[fn]; bad = 1 }
        }
        if (n < 16) { printf "  FAIL: %d kernels found, expected 16 (forward, dq, D, dk/dv x head sizes 64, 128 x BF16, F16)\n", n; bad = 1 }
        exit bad
      }' "$work/ptxas_$arch.txt" || status=1
  fi
  # The tiled FP32 kernels (flash_attention_tiled.cu: the fp32 recipe's attention): no spills either.
  cached_nvcc "${kernel_flags[@]}" "${gencode[@]}" -c -cubin -o "$work/tiled.cubin" "$root/cuda/kernels/flash_attention_tiled.cu" \
    2>"$work/ptxas_tiled_$arch.txt" || { cat "$work/ptxas_tiled_$arch.txt"; exit 1; }
  awk -v arch="$arch" "$ptxas_rules"'
    END {
      bad = 0
      for (i = 1; i <= n; ++i) {
        fn = order[i]
        name = kernel_name(fn)
        printf "sm_%s %-40s %3d registers, %4d bytes stack, spill %d/%d bytes\n", arch, name, regs[fn], stack[fn], stores[fn], loads[fn]
        if (stores[fn] > 0 || loads[fn] > 0) { print "  FAIL: spills registers"; bad = 1 }
      }
      if (n < 12) { printf "  FAIL: %d tiled kernels found, expected 12 (forward, dq, D, dk/dv x 2, 4, 8 columns a lane)\n", n; bad = 1 }
      exit bad
    }' "$work/ptxas_tiled_$arch.txt" || status=1
done
if [ $status -ne 0 ]; then echo "check_flash_kernels: FAILED"
else echo "check_flash_kernels: no spills (tensor-core and tiled kernels); in every kernel's SASS one HMMA per mma.sync, one LDSM per ldmatrix, one LDGSTS per cp.async${cuobjdump:+ (HMMA counts agree with cuobjdump)}$below_sm80"; fi
exit $status

#!/usr/bin/env bash
# Static check that the CUDA kernels move memory in 128-bit units, no GPU needed: nvcc compiles every
# kernel source (cuda/kernels, cuda/gemm, cuda/common) to PTX for one architecture, and for each kernel
# this counts its 128-bit global accesses: ld/st.global of .v4 32-bit or .v2 64-bit elements, and 16-byte
# cp.async copies into shared memory. Issue 13 asks for vectorised 128-bit loads wherever the layout
# allows, so a kernel must have at least one (in any of its template instantiations), unless it is listed
# below with the reason its layout does not allow them or its traffic does not matter. It fails on a
# kernel with none that is not listed, on a listed kernel that has some (the exemption is stale), and on
# a listed kernel that no longer exists. Prints each kernel's count. ctest runs it in GPU builds
# (cuda_static.VectorAccess). GPT_COMPILER_CACHE (ctest sets it to ccache where the build compiles
# through it) runs nvcc through that cache, as scripts/check_flash_kernels.sh does: a kernel file unchanged
# since the last check costs a lookup.
#
#   scripts/check_vector_access.sh [ARCH]     (default: 90)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "check_vector_access: no nvcc (set NVCC)"; exit 1; }
command -v c++filt >/dev/null || { echo "check_vector_access: no c++filt (binutils)"; exit 1; }
arch=${1:-90}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# file:kernel  reason
exempt=$(cat <<'EOF'
fill_copy:fill_kernel  nonzero fills only (a zero fill is cudaMemsetAsync), a few a run
embedding:count_tokens_kernel  the embedding backward's bucket sort: 4-byte token ids, scattered by token
embedding:bucket_offsets_kernel  the embedding backward's bucket sort: a scan of per-token counts
embedding:append_positions_kernel  the embedding backward's bucket sort: 4-byte positions, scattered by token
embedding:order_buckets_kernel  the embedding backward's bucket sort: one bucket's positions a thread
cast:apply_stats  one warp folding the blocks' FP8 statistics into the scaling state
operand_kernels:fold_scales_kernel  one thread: alpha times the operands' inverse scales
operand_kernels:transpose_bytes_kernel  a transpose of 1-byte codes through 32x32 shared tiles (coalesced both ways)
operand_kernels:add_bias_kernel  a bias pass only where cuBLASLt's epilogue cannot take the bias's format
attention_decode:attention_decode_combine_kernel  a head's chunk partials, at most 64 x (head size + 2) floats
reduce:sum_of_squares_total  the fixed-order sum of the first pass's partials (a few thousand doubles)
reduce:bias_backward_total  the first pass's partials, a column a thread (coalesced 8-byte loads)
layernorm:layernorm_param_grads_kernel  the first pass's partials, a column a thread (coalesced 4-byte loads)
row_product:row_product_along_n_kernel  b stored [K,N]: a thread an output column, neighbours read neighbours
row_sum:row_sum_kernel  the emulator's first test kernel (tests/cuda/test_row_sum.cpp), not a model op
attention:store_heads_kernel  the materialised attention (train.attention: materialised, a checking path)
flash_attention_scalar:scalar_forward_kernel  the fused attention's scalar path (head sizes 129-256): correct, slow
flash_attention_scalar:scalar_dq_kernel  the fused attention's scalar path (head sizes 129-256): correct, slow
flash_attention_scalar:scalar_dkv_kernel  the fused attention's scalar path (head sizes 129-256): correct, slow
flash_attention_scalar:delta_from_probabilities_kernel  fp8's D past head size 128, recomputed from the probabilities a row a thread
EOF
)

source "$root/scripts/kernel_check_common.sh"
for cu in "$root"/cuda/kernels/*.cu "$root"/cuda/gemm/*.cu "$root"/cuda/common/*.cu; do
  name=$(basename "$cu" .cu)
  cached_nvcc -std=c++17 -O3 --expt-relaxed-constexpr -DGPT_WITH_CUDA=1 -I"$root/src" -I"$root/cuda" -arch="sm_$arch" \
    -c -ptx "$cu" -o "$work/$name.ptx"
  # One line a kernel instantiation: file, mangled name, count.
  awk -v f="$name" '
    /\.entry / { match($0, /_Z[A-Za-z0-9_]+/); k = substr($0, RSTART, RLENGTH); n[k] = 0 }
    /(ld|st)\.global(\.[A-Za-z0-9_:]+)*\.v(4\.(u32|f32|b32|s32)|2\.(f64|u64|b64|s64))/ { n[k]++ }
    /cp\.async\.c[ag]\.shared\.global.*, 16[,;]/ { n[k]++ }
    END { for (k in n) print f, k, n[k] }' "$work/$name.ptx"
done >"$work/counts"

# Demangled base names (namespace, template arguments and parameters dropped), the largest count of each.
awk '{print $2}' "$work/counts" | c++filt |
  sed -E 's/\(anonymous namespace\):://g; s/^void //; s/\(.*//; s/<.*//; s/.*:://' >"$work/names"
paste -d' ' "$work/counts" "$work/names" |
  awk '{key = $1 ":" $4; if (!(key in best) || $3 > best[key]) best[key] = $3} END {for (k in best) print k, best[k]}' |
  sort >"$work/kernels"

status=0
printf '%-56s %8s  %s\n' "kernel (sm_$arch)" "128-bit" "status"
while read -r key count; do
  reason=$(awk -v k="$key" '$1 == k {sub(/^[^ ]+ +/, ""); print; exit}' <<<"$exempt")
  if [ -n "$reason" ]; then
    if [ "$count" -gt 0 ]; then
      verdict="FAIL: listed as exempt ($reason) but has 128-bit accesses: remove it from the list"
      status=1
    else
      verdict="exempt: $reason"
    fi
  elif [ "$count" -gt 0 ]; then
    verdict=ok
  else
    verdict="FAIL: no 128-bit global access; pack the loads (common/vector_access.cuh) or list it with a reason"
    status=1
  fi
  printf '%-56s %8s  %s\n' "$key" "$count" "$verdict"
done <"$work/kernels"
while read -r key _; do
  grep -q "^$key " "$work/kernels" || { echo "FAIL: $key is listed as exempt but no such kernel was compiled"; status=1; }
done <<<"$exempt"
[ "$status" -eq 0 ] && echo "check_vector_access: every kernel moves memory in 128-bit units or says why not"
exit "$status"

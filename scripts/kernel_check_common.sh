# Sourced by the static kernel checks (check_flash_kernels.sh, check_launch_resources.sh,
# check_vector_access.sh) once they have set $root (the tree) and $nvcc: what they must all do alike.

# nvcc through GPT_COMPILER_CACHE where set: paths under the tree enter its key relative to it, and the
# working directory stays out, so another clone of the same sources finds the same entries.
cached_nvcc() { CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 ${GPT_COMPILER_CACHE:+"$GPT_COMPILER_CACHE"} "$nvcc" "$@"; }

# How the checks that read ptxas's report compile a kernel file: one spelling, so that their compiles of
# the same file for the same architecture are one cache entry.
kernel_flags=(-std=c++17 -O3 --expt-relaxed-constexpr -DGPT_WITH_CUDA=1 -I"$root/src" -I"$root/cuda" -Xptxas -v)

# awk rules over ptxas -v's report: "Compiling entry function 'NAME' for 'sm_XX'", then "N bytes stack
# frame, N bytes spill stores, N bytes spill loads" and "Used N registers, ...": each kernel's figures in
# stack[], stores[], loads[] and regs[] by mangled name, and the names in order[1..n].
ptxas_rules=$(cat <<'EOF'
    /Compiling entry function/ { split($0, q, "'"); fn = q[2] }
    /spill stores/ { stack[fn] = $1 + 0; stores[fn] = $5 + 0; loads[fn] = $9 + 0 }
    /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); regs[fn] = substr($0, RSTART + 5, RLENGTH - 5) + 0; order[++n] = fn }
EOF
)

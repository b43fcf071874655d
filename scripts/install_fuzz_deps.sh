#!/usr/bin/env bash
# What the sanitizer and fuzzing builds need on top of install_deps.sh, from Debian 12's packages: clang 16
# (Debian's default clang 14 cannot capture structured bindings in lambdas, which the CPU backend does),
# its sanitizer and libFuzzer runtimes (libclang-rt-16-dev), its OpenMP runtime (libomp-16-dev) and
# llvm-symbolizer-16 (llvm-16), without which ASan, UBSan and libFuzzer reports show addresses, not functions.
set -euo pipefail
exec "$(dirname "$0")/install_deps.sh" clang-16 libclang-rt-16-dev libomp-16-dev llvm-16

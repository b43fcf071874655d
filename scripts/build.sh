#!/usr/bin/env bash
# Configures and builds gpt-train and its tests in ./build (Release). Extra arguments go to cmake,
# e.g. scripts/build.sh -DGPT_CUDA=OFF.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$root/build" -j "$(nproc)"

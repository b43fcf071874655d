#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test through ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh" "$@"
cd "$root/build"
ctest --output-on-failure -j "$(nproc)" --timeout 600

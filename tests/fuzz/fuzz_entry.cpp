// The libFuzzer entry point of one target; tests/fuzz/CMakeLists.txt compiles it once per target with
// GPT_FUZZ_TARGET naming the function of fuzz_targets.h.
#include "fuzz_targets.h"

#include <spdlog/spdlog.h>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // warnings about the hostile inputs would flood the output
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return gpt::fuzz::GPT_FUZZ_TARGET(data, size); }

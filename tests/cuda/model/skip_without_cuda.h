// The CUDA model tests run on a GPU where there is one and on the emulator in gpt_cuda_emu_tests; a CUDA
// build on a machine without a device skips them and says so.
#pragma once

#include "backend/cuda_entry.h"

#include <gtest/gtest.h>

#define SKIP_WITHOUT_CUDA()           \
  if (gpt::cuda::device_count() == 0) \
  GTEST_SKIP() << "no CUDA device (" << gpt::cuda::describe() << "); gpt_cuda_emu_tests runs these on the emulator"

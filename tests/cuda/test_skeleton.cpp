#include "common/cuda_api.h"
#include <gtest/gtest.h>
TEST(CudaEmuSkeleton, Builds) { EXPECT_EQ(cudaSuccess, 0); }

// Host emulation of CUDA's number formats (__nv_bfloat16, __half, FP8) and their intrinsics.
#pragma once

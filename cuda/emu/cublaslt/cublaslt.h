// Host emulation of the cuBLASLt subset the CUDA backend uses.
#pragma once

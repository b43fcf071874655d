#include "common/cuda_check.h"

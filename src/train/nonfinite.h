// Naming the source of a NaN or Inf: when a step's loss or gradient norm is not finite, the gradient
// tensors are scanned (only then, so the common step pays nothing) for the first one holding NaN/Inf.
#pragma once

#include "model/gpt.h"

#include <string>

namespace gpt {

// "loss is nan, gradient norm is nan; first non-finite gradient: qkvw, layer 1 (element 17 is nan);
// 12 of 16 gradient tensors hold NaN/Inf". Tensors are scanned in llm.c parameter order.
std::string describe_nonfinite_step(double loss, double grad_norm, GPT& model);

}  // namespace gpt

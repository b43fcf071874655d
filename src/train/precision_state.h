// The mixed-precision state a checkpoint carries so a resumed run continues exactly: the fp16 loss
// scaler (scale, good-step count, skipped steps) in the checkpoint's values, and the fp8 scaling table
// (every FP8 tensor's scale and amax history) as the blob "fp8_scaling".
#pragma once

#include "io/checkpoint.h"
#include "model/fp8_gemms.h"
#include "precision/loss_scaler.h"

#include <string>

namespace gpt {

// Adds the state of what is present (either may be null).
void save_precision_state(CheckpointState& state, const LossScaler* scaler, const Fp8Gemms* fp8);
// Restores it. A checkpoint without that state (written under another recipe) leaves the scaler or table
// as it starts and logs that it does; malformed state throws naming the checkpoint directory.
void restore_precision_state(const CheckpointState& state, const std::string& dir, LossScaler* scaler, Fp8Gemms* fp8);

}  // namespace gpt

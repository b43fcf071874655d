// The mixed-precision state a checkpoint carries so a resumed run continues exactly: the fp16 loss
// scaler (scale, good-step count, skipped steps) in the checkpoint's values, and the fp8 scaling table
// (every FP8 tensor's scale and amax history) as the blob "fp8_scaling".
#pragma once

#include "io/checkpoint.h"
#include "precision/fp8_state.h"
#include "precision/loss_scaler.h"

#include <string>

namespace gpt {

// Adds the state of what is present (either may be null).
void save_precision_state(CheckpointState& state, const LossScaler* scaler, const Fp8State* fp8);
// Restores it. A checkpoint without that state (written under another recipe) leaves the scaler or table
// as it starts and logs that it does; malformed state throws naming the checkpoint directory.
void restore_precision_state(const CheckpointState& state, const std::string& dir, LossScaler* scaler, Fp8State* fp8);

}  // namespace gpt

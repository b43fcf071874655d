// Training checkpoints in the run directory:
//   <run_dir>/checkpoints/step_00000100/
//     model.bin      the weights as an llm.c model file (version 3, fp32), so llm.c can read them too
//     optimizer.bin  AdamW moments m and v (fp32) and the optimizer step count
//     state.yaml     step, seed and the data loader's position: everything else needed to continue
//     config.yaml    the resolved configuration of the run that wrote it
// Each is written into a hidden temporary directory that is renamed into place when complete, so a
// crash mid-write never leaves a half checkpoint under a real name.
#pragma once

#include "model/gpt.h"
#include "optim/adamw.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace gpt {

struct CheckpointState {
  int64_t step = 0;  // optimizer steps completed
  uint64_t seed = 0;
  std::map<std::string, uint64_t> loader;  // the data loader's position, field by field
};

std::string checkpoint_dir(const std::string& run_dir, int64_t step);

// Writes a complete checkpoint and returns its directory.
std::string save_checkpoint(const std::string& run_dir, const CheckpointState& state, GPT& model, AdamW& optimizer,
                            const std::string& config_yaml);

// The newest complete checkpoint directory of the run, if any.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);

// Loads weights, optimizer state and the state file; the checkpoint's model shape must match.
CheckpointState load_checkpoint(const std::string& dir, GPT& model, AdamW& optimizer);

// Deletes all but the newest keep_last complete checkpoints (keep_last <= 0 keeps all).
void prune_checkpoints(const std::string& run_dir, int keep_last);

}  // namespace gpt

// Training checkpoints in the run directory:
//   <run_dir>/checkpoints/step_00000100/
//     model.bin      the weights as an llm.c model file (version 3, fp32), so llm.c can read them too;
//                    a LoRA run writes adapters.safetensors (io/lora_adapters.h) instead
//     optimizer.bin  AdamW moments m and v (fp32) and the optimizer step count
//     state.yaml     step, seed, skipped steps, the data loader's position, extension values
//     config.yaml    the resolved configuration of the run that wrote it
//     blob.<name>    extension blobs (CheckpointState::blobs), if any
//     manifest.yaml  every file above with its size and CRC-32C, and its own CRC-32C; written last
//
// Crash safety: everything is written into checkpoints/.step_00000100.tmp/, each file fsynced, then the
// manifest, then the directory is fsynced, renamed to its final name and the parent fsynced. A crash at
// any point leaves either no step_00000100 or a complete one; hidden leftovers are removed by the next
// save. Old checkpoints are pruned (renamed aside, then deleted) only after the new one is in place.
//
// Nothing else is needed to continue bit for bit: every random draw of a run is counter-based Philox keyed
// by (seed, step, ...): dropout by (seed, step, micro-step, layer, site), the data order by (seed, epoch,
// shard), samples by (seed, step); validation resets its loader. So the seed, the step and the loader
// position are the complete RNG state, and the learning-rate schedule is a function of the step.
#pragma once

#include "io/binary_file.h"
#include "model/gpt.h"
#include "optim/adamw.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpt {

inline constexpr const char* kManifestFile = "manifest.yaml";
inline constexpr int kManifestVersion = 1;
// A LoRA run's checkpoint holds adapters.safetensors instead of model.bin, and its state the frozen base's
// identity under these keys: model.init_from (empty for a base drawn from train.seed) and the CRC-32C of
// the base's FP32 values (8 hex digits).
inline constexpr const char* kLoraBasePathKey = "lora_base_path";
inline constexpr const char* kLoraBaseCrcKey = "lora_base_crc32c";

struct CheckpointState {
  int64_t step = 0;           // optimizer steps completed (including skipped ones)
  uint64_t seed = 0;
  // Steps whose update was not applied (train.on_nonfinite: skip, an fp16 overflow); AdamW counted the others.
  int64_t skipped_steps = 0;
  std::map<std::string, uint64_t> loader;  // the data loader's position, field by field

  // Extension points for state other subsystems add, saved and restored without changes here:
  // values: small scalars, kept in state.yaml under `extra:` (a loss scaler's scale and good-step count);
  // blobs: binary state, each its own manifest-checked file blob.<name> (FP8 amax histories, a rank's
  // ZeRO optimizer shard). Names are [A-Za-z0-9_.-], not starting with '.'.
  std::map<std::string, std::string> values;
  std::map<std::string, std::string> blobs;
};

struct ManifestEntry {
  std::string name;  // a file in the checkpoint directory (no '/')
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  bool operator==(const ManifestEntry&) const = default;
};

struct Manifest {
  int64_t step = 0;
  std::vector<ManifestEntry> files;
};

std::string checkpoint_dir(const std::string& run_dir, int64_t step);
// The hidden directory a checkpoint of `step` is assembled in before it is renamed to checkpoint_dir().
std::string checkpoint_staging_dir(const std::string& run_dir, int64_t step);

// Writes a sharded optimizer's state (ZeRO-1) instead of optimizer.bin: called once the staging directory
// exists, it has every rank write its own file there (io/optimizer_shards.h) and returns their names once
// all are on stable storage; they join the manifest.
using OptimizerShardWriter = std::function<std::vector<std::string>(const std::string& staging_dir)>;

// Writes a complete checkpoint and returns its directory. On failure (disk full, unwritable directory)
// the temporary directory is removed and the error names the file and says which checkpoint is intact.
std::string save_checkpoint(const std::string& run_dir, const CheckpointState& state, GPT& model, AdamW& optimizer,
                            const std::string& config_yaml, const OptimizerShardWriter& write_optimizer_shards = {});

// Checkpoint directories of the run (named step_N, whether intact or not), newest first.
std::vector<std::string> list_checkpoints(const std::string& run_dir);

// The newest checkpoint directory that has a manifest (not verified), if any.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);

// What is wrong with the checkpoint, one line per problem naming the file and the mismatch
// ("model.bin: CRC-32C 0x1234abcd, the manifest says 0x89ab0123"); empty when it is intact.
std::vector<std::string> verify_checkpoint(const std::string& dir);

// Loads weights, optimizer state and the state file, verifying the manifest first unless the caller just
// did; throws naming the damaged file, or any header field that does not match the model. The optimizer
// state comes from optimizer.bin or from a ZeRO-1 run's shard files, whichever the checkpoint has; a
// sharded optimizer takes just its ranges, so a checkpoint resumes on any number of ranks.
CheckpointState load_checkpoint(const std::string& dir, GPT& model, AdamW& optimizer, bool verify = true);

// Deletes all but the newest keep_last checkpoints (keep_last <= 0 keeps all).
void prune_checkpoints(const std::string& run_dir, int keep_last);

// The text formats, exposed for tests and fuzzing. Parsers throw gpt::Error naming `where` on any
// malformed input and never trust a size or name they read.
std::string manifest_to_yaml(const Manifest& manifest);
Manifest parse_manifest(std::string_view text, const std::string& where);
std::string checkpoint_state_to_yaml(const CheckpointState& state);
// Fills everything but blobs (which are files of their own).
CheckpointState parse_checkpoint_state(std::string_view text, const std::string& where);

struct OptimizerFileHeader {
  uint64_t num_elements = 0;  // per moment
  uint64_t step_count = 0;
};
inline constexpr size_t kOptimizerHeaderBytes = 256 * sizeof(int32_t);
// Checks magic and version of optimizer.bin's header (the first kOptimizerHeaderBytes bytes).
OptimizerFileHeader parse_optimizer_header(std::string_view header, const std::string& where);
// The header of an optimizer.bin, after checking that the file holds exactly the state it claims.
OptimizerFileHeader read_optimizer_header(const BinaryFile& file);

}  // namespace gpt

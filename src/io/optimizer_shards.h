// Optimizer state split across ranks (ZeRO-1). Each rank writes its own file into the checkpoint,
// optimizer.rank00001-of-00002.bin: the parameter ranges it owns, addressed by index into the parameters
// in llm.c order (the order of model.bin, without the arena's alignment gaps), and the AdamW moments of
// those ranges. Any number of ranks can read a set back, each taking the elements it owns now, and so can
// a run without ZeRO: a checkpoint resumes on a different number of ranks.
//
//   header  256 int32: magic 20261130, version 1, rank, world size, number of ranges R,
//           parameters (low, high 32 bits), optimizer steps (low, high)
//   ranges  R x {int64 first parameter, int64 count}
//   data    m of every range in order, then v (f32)
#pragma once

#include "io/binary_file.h"
#include "layout/parameter_layout.h"
#include "optim/adamw.h"

#include <string>
#include <string_view>

namespace gpt {

std::string optimizer_shard_name(int rank, int world_size);
bool is_optimizer_shard_name(std::string_view file_name);

// Writes this rank's file into the checkpoint directory dir, durably (fsynced); returns its name.
std::string write_optimizer_shard(const std::string& dir, AdamW& optimizer, const ParameterLayout& layout, int rank,
                           int world_size);

// Fills the optimizer's moments (for the ranges it owns) and its step count from dir's optimizer.bin
// (the whole state, written by a run without ZeRO) or else from its set of shard files; returns the step
// count.
int64_t read_optimizer_state(const std::string& dir, AdamW& optimizer, const ParameterLayout& layout);

// Checks one shard file's header and range table against num_parameters and every count against the file's
// size, as reading it does, without reading the moments (for fuzzing); returns the world size it names.
int check_optimizer_shard(BinaryFile file, int64_t num_parameters);

}  // namespace gpt

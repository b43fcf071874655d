// GPT-2 parameter layout, in llm.c's order as llm.c stores them:
// wte[Vp,C] wpe[maxT,C] ln1w[L,C] ln1b[L,C] qkvw[L,3C,C] qkvb[L,3C] attprojw[L,C,C] attprojb[L,C]
// ln2w[L,C] ln2b[L,C] fcw[L,4C,C] fcb[L,4C] fcprojw[L,C,4C] fcprojb[L,C] lnfw[C] lnfb[C].
// (Each tensor is its own aligned arena buffer, so loading a checkpoint copies tensor by tensor.)
// Gradients and the optimizer moments use the same layout in their own arenas. The layout sits below the
// model and the memory planner, which both read it.
#pragma once

#include "config/config.h"
#include "core/arena.h"
#include "precision/precision_layout.h"

#include <string>
#include <vector>

namespace gpt {

// What a parameter is, for weight-decay groups (optim.no_decay) and initialisation.
enum class ParamKind { Embedding, LayerNorm, Bias, Matrix };

struct ParamSpec {
  std::string name;
  ParamKind kind;
  bool residual_projection = false;  // attprojw, fcprojw: GPT-2 scales their init by 1/sqrt(2L)
  bool is_norm_weight = false;       // LayerNorm gains start at 1
};

struct ParameterTensors {
  Tensor wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb;
};

// One block's slice of every per-block parameter tensor.
struct BlockParameters {
  Tensor ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

// The model's parameters as the forward and backward use them: the tensors outside the blocks, and per
// block its own tensors. Views of the masters, of the gradients or of the compute copy of the weights.
struct ModelParameters {
  Tensor wte, wpe, lnfw, lnfb;
  std::vector<BlockParameters> blocks;
};

// Whether parameter `name` is one tensor for the whole model (not one slice per block).
bool outside_blocks(const std::string& name);

// One tensor of a layout given as a list (the LoRA adapters').
struct ParamEntry {
  ParamSpec spec;
  std::vector<int64_t> shape;
};

class ParameterLayout {
 public:
  // The GPT-2 layout above.
  ParameterLayout(const ModelConfig& model, DType dtype);
  // The given tensors in order, in an arena named arena_name. views() and model_views() read the GPT-2
  // layout only; such a layout is addressed by index or name.
  ParameterLayout(const std::string& arena_name, const std::vector<ParamEntry>& entries, DType dtype);

  const ArenaLayout& arena_layout() const { return layout_; }
  const std::vector<ParamSpec>& specs() const { return specs_; }  // index i is arena buffer i
  int64_t num_parameters() const { return num_parameters_; }
  // Views of every parameter tensor inside an arena built from this layout.
  ParameterTensors views(Arena& arena) const;
  // The same tensors per block.
  ModelParameters model_views(Arena& arena, int n_layer) const;

 private:
  ArenaLayout layout_;
  std::vector<ParamSpec> specs_;
  int64_t num_parameters_ = 0;
};

// The compute copy of the weights: each tensor outside the blocks, then every per-block tensor once per
// block, each in the format the precision layout gives it (E4M3 for an FP8 block's linear weights), so
// the arena holds each at its size.
ArenaLayout compute_weights_layout(const ParameterLayout& masters, const PrecisionLayout& precision);
// Views of an arena with that layout.
ModelParameters compute_weight_views(Arena& arena, int n_layer);
// Elements [offset, offset + copy.numel()) of master tensor `tensor` and the compute-copy tensor that holds
// them in the compute format.
struct ComputeCopySlice {
  size_t tensor = 0;
  int64_t offset = 0;
  Tensor copy;
};
// Such an arena as slices of the masters, tensor by tensor in the masters' order: a tensor outside the
// blocks whole, a per-block tensor one slice per block.
std::vector<ComputeCopySlice> compute_copy_slices(const ParameterLayout& masters, Arena& compute, int n_layer);
// The device's FP32 staging buffer of masters kept in host memory (memory.offload: optimizer under a narrow
// recipe): the compute copy is cast from it a slice at a time. It holds the largest per-block slice of any
// tensor, since an FP8 weight's current scale takes the amax of its whole slice, rounded up to 64 elements
// (256 bytes, the arenas' alignment) so that the pieces of a larger tensor outside the blocks, cast one
// after another, start aligned.
ArenaLayout master_staging_layout(const ParameterLayout& masters, int n_layer);

// With the FP32 masters in host memory (memory.offload: optimizer under a narrow recipe), how the device's
// compute copy is made from them; the model allocates, and the ledger plans, what the answer names.
//   Direct: device memory is the host's (the CPU): the copy is cast from the masters where they are.
//   HostCopy: the host casts (or the host AdamW writes) the copy into a twin of it in pinned host memory,
//     and the copy crosses the bus in the compute format, 2 bytes a weight, each tensor to its place.
//   Staging: fp8, whose FP8 weights take their scales from the FP32 masters on the device: the masters
//     cross a slice at a time into the device's staging buffer (master_staging_layout) and are cast there.
enum class HostMastersPath { Direct, HostCopy, Staging };
HostMastersPath host_masters_path(bool fp8, bool device_memory_is_host);

}  // namespace gpt

// GPT-2 parameter layout, in llm.c's order as llm.c stores them:
// wte[Vp,C] wpe[maxT,C] ln1w[L,C] ln1b[L,C] qkvw[L,3C,C] qkvb[L,3C] attprojw[L,C,C] attprojb[L,C]
// ln2w[L,C] ln2b[L,C] fcw[L,4C,C] fcb[L,4C] fcprojw[L,C,4C] fcprojb[L,C] lnfw[C] lnfb[C].
// (Each tensor is its own aligned arena buffer, so loading a checkpoint copies tensor by tensor.)
// Gradients and the optimizer moments use the same layout in their own arenas.
#pragma once

#include "config/config.h"
#include "core/arena.h"

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

class ParameterLayout {
 public:
  ParameterLayout(const ModelConfig& model, DType dtype);

  const ArenaLayout& arena_layout() const { return layout_; }
  const std::vector<ParamSpec>& specs() const { return specs_; }  // index i is arena buffer i
  int64_t num_parameters() const { return num_parameters_; }
  // Views of every parameter tensor inside an arena built from this layout.
  ParameterTensors views(Arena& arena) const;

 private:
  ArenaLayout layout_;
  std::vector<ParamSpec> specs_;
  int64_t num_parameters_ = 0;
};

}  // namespace gpt

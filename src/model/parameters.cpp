#include "model/parameters.h"

namespace gpt {

ParameterLayout::ParameterLayout(const ModelConfig& m, DType dtype) : layout_("parameters") {
  const int64_t L = m.n_layer, C = m.n_embd, Vp = m.padded_vocab_size(), maxT = m.context_length;
  auto add = [&](const char* name, ParamKind kind, std::initializer_list<int64_t> shape, bool residual_projection = false,
                 bool norm_weight = false) {
    const size_t index = layout_.add(name, shape, dtype);
    num_parameters_ += static_cast<int64_t>(layout_.buffer(index).bytes / dtype_size(dtype));
    specs_.push_back({name, kind, residual_projection, norm_weight});
  };
  add("wte", ParamKind::Embedding, {Vp, C});
  add("wpe", ParamKind::Embedding, {maxT, C});
  add("ln1w", ParamKind::LayerNorm, {L, C}, false, true);
  add("ln1b", ParamKind::LayerNorm, {L, C});
  add("qkvw", ParamKind::Matrix, {L, 3 * C, C});
  add("qkvb", ParamKind::Bias, {L, 3 * C});
  add("attprojw", ParamKind::Matrix, {L, C, C}, true);
  add("attprojb", ParamKind::Bias, {L, C});
  add("ln2w", ParamKind::LayerNorm, {L, C}, false, true);
  add("ln2b", ParamKind::LayerNorm, {L, C});
  add("fcw", ParamKind::Matrix, {L, 4 * C, C});
  add("fcb", ParamKind::Bias, {L, 4 * C});
  add("fcprojw", ParamKind::Matrix, {L, C, 4 * C}, true);
  add("fcprojb", ParamKind::Bias, {L, C});
  add("lnfw", ParamKind::LayerNorm, {C}, false, true);
  add("lnfb", ParamKind::LayerNorm, {C});
}

ParameterTensors ParameterLayout::views(Arena& arena) const {
  size_t i = 0;
  ParameterTensors p;
  for (Tensor* t : {&p.wte, &p.wpe, &p.ln1w, &p.ln1b, &p.qkvw, &p.qkvb, &p.attprojw, &p.attprojb, &p.ln2w, &p.ln2b,
                    &p.fcw, &p.fcb, &p.fcprojw, &p.fcprojb, &p.lnfw, &p.lnfb})
    *t = arena.tensor(i++);
  return p;
}

}  // namespace gpt

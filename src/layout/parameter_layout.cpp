#include "layout/parameter_layout.h"

#include <algorithm>

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

ParameterLayout::ParameterLayout(const std::string& arena_name, const std::vector<ParamEntry>& entries, DType dtype)
    : layout_(arena_name) {
  for (const ParamEntry& e : entries) {
    const size_t index = layout_.add(e.spec.name, std::span<const int64_t>(e.shape), dtype);
    num_parameters_ += static_cast<int64_t>(layout_.buffer(index).bytes / dtype_size(dtype));
    specs_.push_back(e.spec);
  }
}

bool outside_blocks(const std::string& name) {
  return name == "wte" || name == "wpe" || name == "lnfw" || name == "lnfb";
}

namespace {

// The per-block members in layout order (after wte and wpe; lnfw and lnfb close the layout).
constexpr Tensor BlockParameters::* kBlockMembers[] = {
    &BlockParameters::ln1w, &BlockParameters::ln1b, &BlockParameters::qkvw,     &BlockParameters::qkvb,
    &BlockParameters::attprojw, &BlockParameters::attprojb, &BlockParameters::ln2w, &BlockParameters::ln2b,
    &BlockParameters::fcw,  &BlockParameters::fcb,  &BlockParameters::fcprojw,  &BlockParameters::fcprojb};

// The compute-weights arena's buffer for block l's slice of the master tensor `name`.
std::string block_buffer_name(const std::string& name, int l) { return name + "." + std::to_string(l); }

}  // namespace

ModelParameters ParameterLayout::model_views(Arena& arena, int n_layer) const {
  const ParameterTensors p = views(arena);
  ModelParameters m{p.wte, p.wpe, p.lnfw, p.lnfb, {}};
  const Tensor ParameterTensors::* whole[] = {&ParameterTensors::ln1w, &ParameterTensors::ln1b, &ParameterTensors::qkvw,
                                              &ParameterTensors::qkvb, &ParameterTensors::attprojw,
                                              &ParameterTensors::attprojb, &ParameterTensors::ln2w,
                                              &ParameterTensors::ln2b, &ParameterTensors::fcw, &ParameterTensors::fcb,
                                              &ParameterTensors::fcprojw, &ParameterTensors::fcprojb};
  m.blocks.resize(static_cast<size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l)
    for (size_t k = 0; k < std::size(kBlockMembers); ++k) m.blocks[l].*kBlockMembers[k] = (p.*whole[k])[l];
  return m;
}

ArenaLayout compute_weights_layout(const ParameterLayout& masters, const PrecisionLayout& precision) {
  ArenaLayout layout("compute_weights");
  const ArenaLayout& m = masters.arena_layout();
  const int L = precision.n_layer();
  for (size_t i = 0; i < m.buffers().size(); ++i) {
    const ArenaBuffer& b = m.buffer(i);
    if (!outside_blocks(b.name)) continue;
    layout.add(b.name, std::span<const int64_t>(b.shape.data(), static_cast<size_t>(b.ndim)),
               precision.compute_weight(b.name, 0).dtype);
  }
  for (int l = 0; l < L; ++l) {
    for (size_t i = 0; i < m.buffers().size(); ++i) {
      const ArenaBuffer& b = m.buffer(i);
      if (outside_blocks(b.name)) continue;
      layout.add(block_buffer_name(b.name, l), std::span<const int64_t>(b.shape.data() + 1, static_cast<size_t>(b.ndim - 1)),
                 precision.compute_weight(b.name, l).dtype);
    }
  }
  return layout;
}

std::vector<ComputeCopySlice> compute_copy_slices(const ParameterLayout& masters, Arena& compute, int n_layer) {
  std::vector<ComputeCopySlice> slices;
  const ArenaLayout& m = masters.arena_layout();
  for (size_t i = 0; i < m.buffers().size(); ++i) {
    const ArenaBuffer& b = m.buffer(i);
    if (outside_blocks(b.name)) {
      slices.push_back({i, 0, compute.tensor(b.name)});
      continue;
    }
    for (int l = 0; l < n_layer; ++l) {
      Tensor copy = compute.tensor(block_buffer_name(b.name, l));
      slices.push_back({i, l * copy.numel(), copy});
    }
  }
  return slices;
}

ArenaLayout master_staging_layout(const ParameterLayout& masters, int n_layer) {
  int64_t largest = 0;
  for (const ArenaBuffer& b : masters.arena_layout().buffers()) {
    int64_t numel = 1;
    for (int d = 0; d < b.ndim; ++d) numel *= b.shape[static_cast<size_t>(d)];
    if (!outside_blocks(b.name)) largest = std::max(largest, numel / n_layer);
  }
  constexpr int64_t kGranule = 64;
  ArenaLayout layout("master_staging");
  layout.add("masters", {(largest + kGranule - 1) / kGranule * kGranule}, masters.arena_layout().buffer(0).dtype);
  return layout;
}

HostMastersPath host_masters_path(bool fp8, bool device_memory_is_host) {
  if (device_memory_is_host) return HostMastersPath::Direct;
  return fp8 ? HostMastersPath::Staging : HostMastersPath::HostCopy;
}

ModelParameters compute_weight_views(Arena& arena, int n_layer) {
  ModelParameters m;
  m.wte = arena.tensor("wte");
  m.wpe = arena.tensor("wpe");
  m.lnfw = arena.tensor("lnfw");
  m.lnfb = arena.tensor("lnfb");
  m.blocks.resize(static_cast<size_t>(n_layer));
  size_t index = 4;
  for (int l = 0; l < n_layer; ++l)
    for (Tensor BlockParameters::* member : kBlockMembers) m.blocks[l].*member = arena.tensor(index++);
  return m;
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

#include "model/kv_cache_decoder.h"

#include "precision/float_formats.h"

#include <spdlog/spdlog.h>

#include <cmath>

namespace gpt {

namespace {

// The cache in qkv's format; every other buffer in FP32, the widest format any recipe stores it in.
ArenaLayout decoder_layout(const ModelConfig& m, DType cache) {
  const int64_t L = m.n_layer, NH = m.n_head, C = m.n_embd, hs = C / NH, T = m.context_length;
  ArenaLayout layout("kv_cache_decoder");
  layout.add("k_cache", {L, NH, T, hs}, cache);
  layout.add("v_cache", {L, NH, T, hs}, cache);
  layout.add("token", {1, 1}, DType::I32);
  for (const char* name : {"x", "residual2", "ln", "atty", "branch"}) layout.add(name, {1, 1, C});
  layout.add("ln_mean", {1, 1});
  layout.add("ln_rstd", {1, 1});
  layout.add("qkv", {1, 1, 3 * C});
  layout.add("scratch", {NH, T});  // attention_decode's scores and probabilities
  layout.add("fch", {1, 1, 4 * C});
  layout.add("fch_gelu", {1, 1, 4 * C});
  layout.add("staging", {1, 1, 4 * C});  // an FP8 input's wider source
  layout.add("logits", {1, 1, m.padded_vocab_size()});
  return layout;
}

}  // namespace

bool KvCacheDecoder::supports(GPT& model) {
  return model.compute_dtype() == DType::F32 || model.backend().capabilities().one_row_products_of_any_formats;
}

KvCacheDecoder::KvCacheDecoder(GPT& model)
    : model_(model),
      backend_(model.backend()),
      layout_(model.precision_layout()),
      capacity_(model.config().context_length),
      arena_(decoder_layout(model.config(), model.precision_layout().block(0, BlockTensor::Qkv).dtype), model.backend()),
      logits_raw_(static_cast<size_t>(model.config().vocab_size) * dtype_size(layout_.model(ModelTensor::Logits).dtype)),
      logits_(static_cast<size_t>(model.config().vocab_size)) {
  GPT_CHECK(supports(model),
            "KV-cache decoding of the {} recipe multiplies 1-row products of mixed formats, which the {} backend "
            "does not run; sample without the cache (it reruns the window as the model's forward does)",
            recipe_name(model.precision().recipe), backend_.name());
  // Whatever an earlier forward left pending goes first: discarding uploads the table's scales, which
  // under current scaling would replace the weight scales the refresh computes.
  if (model.fp8()) model.fp8()->discard_step();
  if (model.compute_weight_arena() || model.lora_compute_arena()) model.refresh_compute_weights();
}

KvCacheDecoder::~KvCacheDecoder() {
  if (!model_.fp8()) return;
  // The decoder's FP8 statistics stay out of the next training step, as an evaluation's do; a destructor
  // cannot throw, and a failure here leaves only statistics that the next step's finish would also reset.
  try {
    model_.fp8()->discard_step();
  } catch (const std::exception& e) {
    spdlog::warn("KV-cache decoder: discarding its FP8 statistics failed: {}", e.what());
  }
}

Tensor KvCacheDecoder::view(const char* buffer, std::initializer_list<int64_t> dims, TensorFormat f) {
  const Tensor full = arena_.tensor(arena_.layout().index_of(buffer));
  Tensor t(full.data, dims, f.dtype, full.device);
  GPT_CHECK(t.bytes() <= full.bytes(), "decoder view {} {} does not fit buffer {}", t.shape_string(), dtype_name(f.dtype),
            buffer);
  if (f.slot >= 0) t.scaling = model_.fp8()->meta(f.slot);
  return t;
}

template <class Op>
void KvCacheDecoder::produce(int l, BlockTensor t, const Tensor& dst, Op&& op) {
  const DType source = layout_.source(l, t);
  if (source == dst.dtype) {
    op(dst);
    return;
  }
  Tensor src = view("staging", {1, 1, dst.dim(-1)}, {source, -1});
  op(src);
  Fp8State& fp8 = *model_.fp8();
  if (!fp8.delayed()) backend_.fp8_current_scale({src, dst.scaling, dst.dtype, fp8.margin()});
  CastArgs cast;
  cast.out = dst;
  cast.in = src;
  backend_.cast(cast);
}

std::span<const float> KvCacheDecoder::append(int32_t token) {
  const ModelConfig& m = model_.config();
  GPT_CHECK(length_ < capacity_, "the KV cache is full: {} positions, model.context_length", capacity_);
  GPT_CHECK(token >= 0 && token < m.padded_vocab_size(), "token {} is outside the model's vocabulary of {}", token,
            m.padded_vocab_size());
  const int64_t C = m.n_embd, NH = m.n_head, hs = C / NH;
  const int64_t pos = length_, t = pos + 1;
  const ModelParameters& p = model_.compute_params();
  const TensorFormat statistics{layout_.statistics(), -1};
  const Tensor x = view("x", {1, 1, C}, layout_.model(ModelTensor::Encoded));
  const Tensor mean = view("ln_mean", {1, 1}, statistics), rstd = view("ln_rstd", {1, 1}, statistics);
  const Tensor scratch = view("scratch", {NH, capacity_}, statistics);
  const Tensor branch = view("branch", {1, 1, C}, layout_.model(ModelTensor::Branch));
  const Tensor k_cache = arena_.tensor(arena_.layout().index_of("k_cache"));
  const Tensor v_cache = arena_.tensor(arena_.layout().index_of("v_cache"));
  const Tensor tok = view("token", {1, 1}, {DType::I32, -1});
  backend_.copy_to_device(tok.data, &token, sizeof token);

  // Position pos's embedding row is row 0 of the table seen from pos on.
  const Tensor wpe_from_pos(p.wpe[pos].data, {m.context_length - pos, C}, p.wpe.dtype, p.wpe.device);
  backend_.embedding_forward({x, tok, p.wte, wpe_from_pos, {}});
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  using K = BlockTensor;
  // Each residual add is fused with the LayerNorm that reads its sum (residual_layernorm_forward), as the
  // model's forward does: ln2 inside a block, the next block's ln1 (or lnf) at its end; only the first
  // block's ln1 reads the embedding alone.
  produce(0, K::Ln1, view("ln", {1, 1, C}, layout_.block(0, K::Ln1)),
          [&](const Tensor& out) { backend_.layernorm_forward({out, mean, rstd, x, p.blocks[0].ln1w, p.blocks[0].ln1b}); });
  const Tensor lnf = view("ln", {1, 1, C}, layout_.model(ModelTensor::Lnf));
  for (int l = 0; l < m.n_layer; ++l) {
    const BlockParameters& w = p.blocks[static_cast<size_t>(l)];
    const Tensor ln1 = view("ln", {1, 1, C}, layout_.block(l, K::Ln1));
    const Tensor qkv = view("qkv", {1, 1, 3 * C}, layout_.block(l, K::Qkv));
    const Tensor atty = view("atty", {1, 1, C}, layout_.block(l, K::Atty));
    const Tensor residual2 = view("residual2", {1, 1, C}, layout_.block(l, K::Residual2));
    const Tensor ln2 = view("ln", {1, 1, C}, layout_.block(l, K::Ln2));
    const Tensor fch = view("fch", {1, 1, 4 * C}, layout_.block(l, K::Fch));
    const Tensor fch_gelu = view("fch_gelu", {1, 1, 4 * C}, layout_.block(l, K::FchGelu));
    backend_.matmul({qkv, ln1, w.qkvw, w.qkvb, false, true});
    model_.lora_inference(l, LoraTarget::Qkv, qkv, ln1);
    produce(l, K::Atty, atty, [&](const Tensor& out) {
      backend_.attention_decode({out, qkv, k_cache[l], v_cache[l], scratch, t, scale});
    });
    backend_.matmul({branch, atty, w.attprojw, w.attprojb, false, true});
    model_.lora_inference(l, LoraTarget::AttnProj, branch, atty);
    produce(l, K::Ln2, ln2, [&](const Tensor& out) {
      backend_.residual_layernorm_forward({{residual2, x, branch, {}}, {out, mean, rstd, residual2, w.ln2w, w.ln2b}});
    });
    backend_.matmul({fch, ln2, w.fcw, w.fcb, false, true});
    model_.lora_inference(l, LoraTarget::Fc, fch, ln2);
    produce(l, K::FchGelu, fch_gelu, [&](const Tensor& out) { backend_.gelu_forward({out, fch}); });
    backend_.matmul({branch, fch_gelu, w.fcprojw, w.fcprojb, false, true});
    model_.lora_inference(l, LoraTarget::FcProj, branch, fch_gelu);
    const ResidualForwardArgs mlp_residual{x, residual2, branch, {}};
    if (l + 1 < m.n_layer) {
      const BlockParameters& next = p.blocks[static_cast<size_t>(l + 1)];
      produce(l + 1, K::Ln1, view("ln", {1, 1, C}, layout_.block(l + 1, K::Ln1)), [&](const Tensor& out) {
        backend_.residual_layernorm_forward({mlp_residual, {out, mean, rstd, x, next.ln1w, next.ln1b}});
      });
    } else {
      backend_.residual_layernorm_forward({mlp_residual, {lnf, mean, rstd, x, p.lnfw, p.lnfb}});
    }
  }
  const TensorFormat logits_format = layout_.model(ModelTensor::Logits);
  const Tensor logits = view("logits", {1, 1, m.padded_vocab_size()}, logits_format);
  backend_.matmul({logits, lnf, p.wte, Tensor(), false, true});
  backend_.copy_to_host(logits_raw_.data(), logits.data, logits_raw_.size());
  for (size_t i = 0; i < logits_.size(); ++i)
    logits_[i] = static_cast<float>(decode_element(logits_format.dtype, logits_raw_.data(), i));
  ++length_;
  return logits_;
}

}  // namespace gpt

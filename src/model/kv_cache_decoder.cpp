#include "model/kv_cache_decoder.h"

#include <cmath>

namespace gpt {

namespace {

ArenaLayout decoder_layout(const ModelConfig& m) {
  const int64_t L = m.n_layer, NH = m.n_head, C = m.n_embd, hs = C / NH, T = m.context_length;
  ArenaLayout layout("kv_cache_decoder");
  layout.add("k_cache", {L, NH, T, hs});
  layout.add("v_cache", {L, NH, T, hs});
  layout.add("token", {1, 1}, DType::I32);
  layout.add("x", {1, 1, C});
  layout.add("residual2", {1, 1, C});
  layout.add("ln", {1, 1, C});
  layout.add("ln_mean", {1, 1});
  layout.add("ln_rstd", {1, 1});
  layout.add("qkv", {1, 1, 3 * C});
  layout.add("scores", {1, T});
  layout.add("probs", {1, T});
  layout.add("atty", {1, 1, C});
  layout.add("branch", {1, 1, C});
  layout.add("fch", {1, 1, 4 * C});
  layout.add("fch_gelu", {1, 1, 4 * C});
  layout.add("logits", {1, 1, m.padded_vocab_size()});
  return layout;
}

}  // namespace

KvCacheDecoder::KvCacheDecoder(GPT& model)
    : model_(model),
      backend_(model.backend()),
      capacity_(model.config().context_length),
      arena_(decoder_layout(model.config()), model.backend()),
      logits_(static_cast<size_t>(model.config().vocab_size)) {
  GPT_CHECK(model.compute_dtype() == DType::F32 && model.dtype() == DType::F32,
            "KV-cache decoding runs the FP32 weights; this model computes in {}", dtype_name(model.compute_dtype()));
  GPT_CHECK(!model.lora().enabled(), "KV-cache decoding reads the base weights alone; a LoRA model samples uncached "
            "(or export --merge it first)");
}

std::span<const float> KvCacheDecoder::append(int32_t token) {
  const ModelConfig& m = model_.config();
  GPT_CHECK(length_ < capacity_, "the KV cache is full: {} positions, model.context_length", capacity_);
  GPT_CHECK(token >= 0 && token < m.padded_vocab_size(), "token {} is outside the model's vocabulary of {}", token,
            m.padded_vocab_size());
  const int64_t C = m.n_embd, NH = m.n_head, hs = C / NH;
  const int64_t pos = length_, t = pos + 1;
  const ParameterTensors& p = model_.params();
  Tensor x = arena_.tensor("x"), residual2 = arena_.tensor("residual2"), ln = arena_.tensor("ln");
  Tensor mean = arena_.tensor("ln_mean"), rstd = arena_.tensor("ln_rstd"), qkv = arena_.tensor("qkv");
  Tensor scores = arena_.tensor("scores").prefix({1, t}), probs = arena_.tensor("probs").prefix({1, t});
  Tensor atty = arena_.tensor("atty"), branch = arena_.tensor("branch");
  Tensor fch = arena_.tensor("fch"), fch_gelu = arena_.tensor("fch_gelu");
  Tensor k_cache = arena_.tensor("k_cache"), v_cache = arena_.tensor("v_cache");
  Tensor tok = arena_.tensor("token");
  backend_.copy_to_device(tok.data, &token, sizeof token);

  // Position pos's embedding row is row 0 of the table seen from pos on.
  const Tensor wpe_from_pos(p.wpe[pos].data, {m.context_length - pos, C}, p.wpe.dtype, p.wpe.device);
  backend_.embedding_forward({x, tok, p.wte, wpe_from_pos, {}});
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const Tensor qkv_flat = qkv.reshaped({3 * C});
  const Tensor atty_flat = atty.reshaped({C});
  for (int l = 0; l < m.n_layer; ++l) {
    backend_.layernorm_forward({ln, mean, rstd, x, p.ln1w[l], p.ln1b[l]});
    backend_.matmul({qkv, ln, p.qkvw[l], p.qkvb[l], false, true});
    for (int64_t h = 0; h < NH; ++h) {
      const Tensor keys = k_cache[l][h], values = v_cache[l][h];
      backend_.copy({keys[pos], qkv_flat.elements(C + h * hs, hs)});
      backend_.copy({values[pos], qkv_flat.elements(2 * C + h * hs, hs)});
      const Tensor q = qkv_flat.elements(h * hs, hs).reshaped({1, hs});
      backend_.matmul({scores, q, keys.prefix({t, hs}), Tensor(), false, true, scale});
      backend_.softmax_forward({probs, scores});
      backend_.matmul({atty_flat.elements(h * hs, hs).reshaped({1, hs}), probs, values.prefix({t, hs}), Tensor()});
    }
    backend_.matmul({branch, atty, p.attprojw[l], p.attprojb[l], false, true});
    backend_.residual_forward({residual2, x, branch, {}});
    backend_.layernorm_forward({ln, mean, rstd, residual2, p.ln2w[l], p.ln2b[l]});
    backend_.matmul({fch, ln, p.fcw[l], p.fcb[l], false, true});
    backend_.gelu_forward({fch_gelu, fch});
    backend_.matmul({branch, fch_gelu, p.fcprojw[l], p.fcprojb[l], false, true});
    backend_.residual_forward({x, residual2, branch, {}});
  }
  backend_.layernorm_forward({ln, mean, rstd, x, p.lnfw, p.lnfb});
  Tensor logits = arena_.tensor("logits");
  backend_.matmul({logits, ln, p.wte, Tensor(), false, true});
  backend_.copy_to_host(logits_.data(), logits.data, logits_.size() * sizeof(float));
  ++length_;
  return logits_;
}

}  // namespace gpt

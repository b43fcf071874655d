#include "model/gpt.h"

#include "core/random.h"

#include <cmath>

namespace gpt {
namespace {

// Host <-> backend transfers of float tensors whose dtype is F32 or F64, through doubles.
std::vector<double> download(Backend& backend, const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F64) {
    backend.copy_to_host(out.data(), t.data, t.bytes());
  } else {
    std::vector<float> tmp(out.size());
    backend.copy_to_host(tmp.data(), t.f32(), t.bytes());
    for (size_t i = 0; i < tmp.size(); ++i) out[i] = tmp[i];
  }
  return out;
}

void upload(Backend& backend, const Tensor& t, std::span<const double> values) {
  GPT_CHECK(values.size() == static_cast<size_t>(t.numel()), "upload of {} values into a tensor of {}", values.size(),
            t.numel());
  if (t.dtype == DType::F64) {
    backend.copy_to_device(t.data, values.data(), t.bytes());
  } else {
    std::vector<float> tmp(values.begin(), values.end());
    backend.copy_to_device(t.f32(), tmp.data(), t.bytes());
  }
}

}  // namespace

GPT::GPT(const ModelConfig& config, int batch_size, int seq_len, Backend& backend, DType dtype)
    : config_(config),
      backend_(backend),
      dtype_(dtype),
      max_batch_(batch_size),
      max_seq_(seq_len),
      layout_(config, dtype),
      params_arena_(layout_.arena_layout(), backend),
      grads_arena_(layout_.arena_layout(), backend),
      acts_arena_(activation_layout(config, batch_size, seq_len, dtype), backend) {
  GPT_CHECK(config.n_embd % config.n_head == 0, "n_head {} does not divide n_embd {}", config.n_head, config.n_embd);
  GPT_CHECK(seq_len <= config.context_length, "seq_len {} exceeds context_length {}", seq_len, config.context_length);
  params_ = layout_.views(params_arena_);
  grads_ = layout_.views(grads_arena_);
  acts_ = activation_views(acts_arena_);
  // Zero everything once, alignment gaps included, so flat reductions over an arena are exact.
  for (Arena* arena : {&params_arena_, &grads_arena_, &acts_arena_})
    if (arena->layout().total_bytes() > 0)
      backend_.fill({Tensor(arena->base(), {static_cast<int64_t>(arena->layout().total_bytes() / 4)}), 0.0f});
}

void GPT::init_weights(uint64_t seed) {
  const auto& specs = layout_.specs();
  const double residual_std = config_.init_std / std::sqrt(2.0 * config_.n_layer);
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& spec = specs[i];
    Tensor t = params_arena_.tensor(i);
    std::vector<double> values(static_cast<size_t>(t.numel()), 0.0);
    if (spec.is_norm_weight) {
      std::fill(values.begin(), values.end(), 1.0);
    } else if (spec.kind == ParamKind::Embedding || spec.kind == ParamKind::Matrix) {
      HostRng rng(seed, static_cast<uint32_t>(i));
      const double std = spec.residual_projection ? residual_std : config_.init_std;
      size_t count = values.size();
      // Padded vocabulary rows of wte never see a token; they stay zero.
      if (spec.name == "wte") count = static_cast<size_t>(config_.vocab_size) * config_.n_embd;
      for (size_t j = 0; j < count; ++j) values[j] = std * rng.normal();
    }
    upload(backend_, t, values);
  }
}

std::vector<float> GPT::parameters_to_host() {
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(num_parameters()));
  for (size_t i = 0; i < layout_.specs().size(); ++i) {
    std::vector<double> values = download(backend_, params_arena_.tensor(i));
    flat.insert(flat.end(), values.begin(), values.end());
  }
  return flat;
}

void GPT::parameters_from_host(std::span<const float> flat) {
  GPT_CHECK(flat.size() == static_cast<size_t>(num_parameters()), "expected {} parameters, got {}", num_parameters(),
            flat.size());
  size_t offset = 0;
  for (size_t i = 0; i < layout_.specs().size(); ++i) {
    Tensor t = params_arena_.tensor(i);
    const size_t n = static_cast<size_t>(t.numel());
    std::vector<double> values(flat.begin() + offset, flat.begin() + offset + n);
    upload(backend_, t, values);
    offset += n;
  }
}

DropoutSpec GPT::dropout(const StepContext& ctx, uint32_t layer, RngSite site) const {
  DropoutSpec d;
  d.p = ctx.training ? static_cast<float>(config_.dropout) : 0.0f;
  d.stream = RngStream{ctx.seed, ctx.step, ctx.micro_step, layer, site};
  return d;
}

void GPT::forward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B, int T,
                  const StepContext& ctx, float dloss) {
  GPT_CHECK(B >= 1 && B <= max_batch_ && T >= 1 && T <= max_seq_,
            "micro-batch {}x{} exceeds the planned {}x{}", B, T, max_batch_, max_seq_);
  GPT_CHECK(tokens.size() == static_cast<size_t>(B) * T, "expected {} tokens, got {}", B * T, tokens.size());
  GPT_CHECK(targets.empty() || targets.size() == tokens.size(), "expected {} targets, got {}", tokens.size(),
            targets.size());
  GPT_CHECK(dloss == 0.0f || !targets.empty(), "a training forward needs targets");
  const int64_t C = config_.n_embd, NH = config_.n_head, Vp = config_.padded_vocab_size();
  const ParameterTensors& p = params_;
  ActivationTensors& a = acts_;

  Tensor tok = a.tokens.prefix({B, T});
  backend_.copy_to_device(tok.data, tokens.data(), tok.bytes());

  auto btc = [&](const Tensor& t, int64_t inner) { return t.prefix({B, T, inner}); };
  auto layer_btc = [&](const Tensor& t, int l, int64_t inner) { return t[l].prefix({B, T, inner}); };
  auto layer_bt = [&](const Tensor& t, int l) { return t[l].prefix({B, T}); };

  backend_.embedding_forward({btc(a.encoded, C), tok, p.wte, p.wpe, dropout(ctx, 0, RngSite::Embedding)});
  for (int l = 0; l < config_.n_layer; ++l) {
    const auto ul = static_cast<uint32_t>(l);
    Tensor residual = l == 0 ? btc(a.encoded, C) : layer_btc(a.residual3, l - 1, C);
    Tensor ln1 = layer_btc(a.ln1, l, C), qkv = layer_btc(a.qkv, l, 3 * C), atty = layer_btc(a.atty, l, C);
    Tensor attproj = layer_btc(a.attproj, l, C), residual2 = layer_btc(a.residual2, l, C);
    Tensor ln2 = layer_btc(a.ln2, l, C), fch = layer_btc(a.fch, l, 4 * C), fch_gelu = layer_btc(a.fch_gelu, l, 4 * C);
    Tensor fcproj = layer_btc(a.fcproj, l, C), residual3 = layer_btc(a.residual3, l, C);

    backend_.layernorm_forward({ln1, layer_bt(a.ln1_mean, l), layer_bt(a.ln1_rstd, l), residual, p.ln1w[l], p.ln1b[l]});
    backend_.matmul({qkv, ln1, p.qkvw[l], p.qkvb[l], false, true});
    backend_.attention_forward({atty, a.probs[l].prefix({B, NH, T, T}), qkv, config_.n_head,
                                dropout(ctx, ul, RngSite::AttentionProbs)});
    backend_.matmul({attproj, atty, p.attprojw[l], p.attprojb[l], false, true});
    backend_.residual_forward({residual2, residual, attproj, dropout(ctx, ul, RngSite::AttentionResidual)});
    backend_.layernorm_forward({ln2, layer_bt(a.ln2_mean, l), layer_bt(a.ln2_rstd, l), residual2, p.ln2w[l], p.ln2b[l]});
    backend_.matmul({fch, ln2, p.fcw[l], p.fcb[l], false, true});
    backend_.gelu_forward({fch_gelu, fch});
    backend_.matmul({fcproj, fch_gelu, p.fcprojw[l], p.fcprojb[l], false, true});
    backend_.residual_forward({residual3, residual2, fcproj, dropout(ctx, ul, RngSite::MlpResidual)});
  }
  Tensor last = layer_btc(a.residual3, config_.n_layer - 1, C);
  backend_.layernorm_forward({btc(a.lnf, C), a.lnf_mean.prefix({B, T}), a.lnf_rstd.prefix({B, T}), last, p.lnfw, p.lnfb});
  Tensor logits = btc(a.logits, Vp);
  backend_.matmul({logits, btc(a.lnf, C), p.wte, Tensor(), false, true});

  last_B_ = B;
  last_T_ = T;
  last_has_dlogits_ = false;
  if (targets.empty()) return;
  Tensor tgt = a.targets.prefix({B, T});
  backend_.copy_to_device(tgt.data, targets.data(), tgt.bytes());
  CrossEntropyArgs ce;
  const int64_t N = static_cast<int64_t>(B) * T;
  ce.losses = a.losses.prefix({N});
  ce.logits = logits.reshaped({N, Vp});
  ce.targets = tgt.reshaped({N});
  ce.vocab_size = config_.vocab_size;
  if (dloss > 0.0f) {
    ce.dlogits = ce.logits;
    ce.dloss = dloss;
    last_has_dlogits_ = true;
  }
  backend_.cross_entropy(ce);
}

double GPT::loss_sum() {
  std::vector<double> losses = download(backend_, acts_.losses.prefix({last_B_, last_T_}));
  double sum = 0.0;
  for (double x : losses) sum += x;
  return sum;
}

std::vector<float> GPT::logits_at(int b, int t) {
  GPT_CHECK(!last_has_dlogits_, "logits were overwritten by a training forward");
  GPT_CHECK(b < last_B_ && t < last_T_, "position ({}, {}) outside the last forward's {}x{}", b, t, last_B_, last_T_);
  const int64_t Vp = config_.padded_vocab_size();
  Tensor row = acts_.logits.prefix({last_B_, last_T_, Vp})[b][t].prefix({config_.vocab_size});
  std::vector<double> values = download(backend_, row);
  return std::vector<float>(values.begin(), values.end());
}

void GPT::backward(const StepContext& ctx) {
  GPT_CHECK(last_has_dlogits_, "backward needs a preceding training forward (with targets and dloss > 0)");
  const int B = last_B_, T = last_T_;
  const int64_t C = config_.n_embd, NH = config_.n_head, Vp = config_.padded_vocab_size();
  const ParameterTensors& p = params_;
  const ParameterTensors& g = grads_;
  ActivationTensors& a = acts_;
  auto btc = [&](const Tensor& t, int64_t inner) { return t.prefix({B, T, inner}); };
  auto layer_btc = [&](const Tensor& t, int l, int64_t inner) { return t[l].prefix({B, T, inner}); };
  auto layer_bt = [&](const Tensor& t, int l) { return t[l].prefix({B, T}); };

  Tensor dresidual = btc(a.dresidual, C), dbranch = btc(a.dbranch, C), datty = btc(a.datty, C);
  Tensor dqkv = btc(a.dqkv, 3 * C), dfch = btc(a.dfch, 4 * C), dprobs = a.dprobs.prefix({B, NH, T, T});
  Tensor dlogits = btc(a.logits, Vp), lnf = btc(a.lnf, C);

  // LM head, tied to wte: logits = lnf wte^T.
  backend_.matmul({dbranch, dlogits, p.wte, Tensor()});
  backend_.matmul({g.wte, dlogits, lnf, Tensor(), true, false, 1.0f, 1.0f});
  backend_.fill({dresidual, 0.0f});
  backend_.layernorm_backward({dresidual, g.lnfw, g.lnfb, dbranch, layer_btc(a.residual3, config_.n_layer - 1, C),
                               p.lnfw, a.lnf_mean.prefix({B, T}), a.lnf_rstd.prefix({B, T})});

  // dresidual holds dL/d(residual3[l]) on entry to layer l and dL/d(block input) on exit.
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const auto ul = static_cast<uint32_t>(l);
    Tensor residual = l == 0 ? btc(a.encoded, C) : layer_btc(a.residual3, l - 1, C);

    backend_.residual_backward({dbranch, dresidual, dropout(ctx, ul, RngSite::MlpResidual)});
    backend_.matmul({dfch, dbranch, p.fcprojw[l], Tensor()});
    backend_.matmul({g.fcprojw[l], dbranch, layer_btc(a.fch_gelu, l, 4 * C), Tensor(), true, false, 1.0f, 1.0f});
    backend_.bias_backward({g.fcprojb[l], dbranch});
    backend_.gelu_backward({dfch, dfch, layer_btc(a.fch, l, 4 * C)});
    backend_.matmul({dbranch, dfch, p.fcw[l], Tensor()});
    backend_.matmul({g.fcw[l], dfch, layer_btc(a.ln2, l, C), Tensor(), true, false, 1.0f, 1.0f});
    backend_.bias_backward({g.fcb[l], dfch});
    backend_.layernorm_backward({dresidual, g.ln2w[l], g.ln2b[l], dbranch, layer_btc(a.residual2, l, C), p.ln2w[l],
                                 layer_bt(a.ln2_mean, l), layer_bt(a.ln2_rstd, l)});

    backend_.residual_backward({dbranch, dresidual, dropout(ctx, ul, RngSite::AttentionResidual)});
    backend_.matmul({datty, dbranch, p.attprojw[l], Tensor()});
    backend_.matmul({g.attprojw[l], dbranch, layer_btc(a.atty, l, C), Tensor(), true, false, 1.0f, 1.0f});
    backend_.bias_backward({g.attprojb[l], dbranch});
    backend_.attention_backward({dqkv, dprobs, datty, layer_btc(a.qkv, l, 3 * C), a.probs[l].prefix({B, NH, T, T}),
                                 config_.n_head, dropout(ctx, ul, RngSite::AttentionProbs)});
    backend_.matmul({dbranch, dqkv, p.qkvw[l], Tensor()});
    backend_.matmul({g.qkvw[l], dqkv, layer_btc(a.ln1, l, C), Tensor(), true, false, 1.0f, 1.0f});
    backend_.bias_backward({g.qkvb[l], dqkv});
    backend_.layernorm_backward({dresidual, g.ln1w[l], g.ln1b[l], dbranch, residual, p.ln1w[l],
                                 layer_bt(a.ln1_mean, l), layer_bt(a.ln1_rstd, l)});
  }
  backend_.embedding_backward({g.wte, g.wpe, dresidual, a.tokens.prefix({B, T}), dropout(ctx, 0, RngSite::Embedding)});
}

void GPT::zero_grads() { backend_.fill({gradients_flat(), 0.0f}); }

Tensor GPT::gradients_flat() {
  const size_t bytes = grads_arena_.layout().total_bytes();
  return Tensor(grads_arena_.base(), {static_cast<int64_t>(bytes / dtype_size(dtype_))}, dtype_, backend_.device());
}

double GPT::gradient_norm_squared() {
  backend_.sum_of_squares({acts_.sum_squares, gradients_flat()});
  return download(backend_, acts_.sum_squares)[0];
}

}  // namespace gpt

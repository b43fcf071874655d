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

namespace {

ActivationShape model_activation_shape(const ModelConfig& config, int batch_size, int seq_len, DType dtype,
                                       bool keeps_probs, const PrecisionRecipe& precision) {
  ActivationShape shape;
  shape.batch_size = batch_size;
  shape.seq_len = seq_len;
  shape.dtype = dtype;
  shape.keeps_probs = keeps_probs;
  set_fp8_fields(shape, precision, config.n_layer);
  return shape;
}

}  // namespace

GPT::GPT(const ModelConfig& config, int batch_size, int seq_len, Backend& backend, DType dtype,
         const RecomputePolicy& recompute, const PrecisionRecipe& precision)
    : config_(config),
      backend_(backend),
      dtype_(dtype),
      max_batch_(batch_size),
      max_seq_(seq_len),
      layout_(config, dtype),
      plan_(plan_activations(
          config, model_activation_shape(config, batch_size, seq_len, dtype, backend.attention_keeps_probs(), precision),
          recompute)),
      params_arena_(layout_.arena_layout(), backend),
      grads_arena_(layout_.arena_layout(), backend),
      acts_arena_(plan_.layout, backend),
      host_staging_(static_cast<size_t>(batch_size) * seq_len * dtype_size(dtype)) {
  GPT_CHECK(config.n_embd % config.n_head == 0, "n_head {} does not divide n_embd {}", config.n_head, config.n_embd);
  GPT_CHECK(seq_len <= config.context_length, "seq_len {} exceeds context_length {}", seq_len, config.context_length);
  params_ = layout_.views(params_arena_);
  grads_ = layout_.views(grads_arena_);
  // Zero everything once, alignment gaps included, so flat reductions over an arena are exact.
  for (Arena* arena : {&params_arena_, &grads_arena_, &acts_arena_})
    if (arena->layout().total_bytes() > 0)
      backend_.fill({Tensor(arena->base(), {static_cast<int64_t>(arena->layout().total_bytes() / 4)}), 0.0f});

  precision.validate(config.n_layer);
  precision_ = precision;
  compute_dtype_ = precision.compute_dtype();
  if (compute_dtype_ != DType::F32 || precision.grad_dtype != DType::F32)
    GPT_CHECK(dtype_ == DType::F32, "mixed precision needs F32 master weights, not {}", dtype_name(dtype_));
  if (compute_dtype_ != DType::F32) {
    compute_arena_ = std::make_unique<Arena>(layout_.arena_layout(), backend_);
    compute_params_ = layout_.views(*compute_arena_);
  }
  if (precision.recipe == RecipeKind::Fp8) fp8_ = std::make_unique<Fp8Gemms>(precision, config.n_layer, backend_);
}

GPT::~GPT() = default;

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

void GPT::round_to_compute(const Tensor& t) {
  if (compute_dtype_ == DType::F32 || t.empty()) return;
  QuantizeRoundtripArgs q;
  q.out = t;
  q.in = t;
  q.format = compute_dtype_;
  backend_.quantize_roundtrip(q);
}

void GPT::store_gemm_input(const Tensor& x, int l, Fp8Linear which) {
  if (fp8_block(l)) fp8_->quantize(x, x, l, which, Fp8Operand::Input);
  else round_to_compute(x);
}

void GPT::refresh_compute_weights() {
  // The masters may have changed since the last forward (an optimizer step, a load). Alignment gaps are
  // zero in both arenas and stay zero.
  const int64_t n = static_cast<int64_t>(params_arena_.layout().total_bytes() / sizeof(float));
  QuantizeRoundtripArgs q;
  q.out = Tensor(compute_arena_->base(), {n}, DType::F32, backend_.device());
  q.in = Tensor(params_arena_.base(), {n}, DType::F32, backend_.device());
  q.format = compute_dtype_;
  backend_.quantize_roundtrip(q);
  if (!fp8_) return;
  // An FP8 block's linear weights are cast from the FP32 masters, as the GPU casts them, not from BF16.
  for (int l = 0; l < config_.n_layer; ++l) {
    if (!fp8_->layer_uses_fp8(l)) continue;
    const std::pair<Tensor ParameterTensors::*, Fp8Linear> weights[] = {{&ParameterTensors::qkvw, Fp8Linear::Qkv},
                                                                         {&ParameterTensors::attprojw, Fp8Linear::AttnProj},
                                                                         {&ParameterTensors::fcw, Fp8Linear::Fc},
                                                                         {&ParameterTensors::fcprojw, Fp8Linear::FcProj}};
    for (const auto& [member, which] : weights)
      fp8_->quantize((compute_params_.*member)[l], (params_.*member)[l], l, which, Fp8Operand::Weight);
  }
}

void GPT::round_gradients(int l) {
  if (precision_.grad_dtype == DType::F32) return;
  auto round = [&](const Tensor& g) {
    QuantizeRoundtripArgs q;
    q.out = g;
    q.in = g;
    q.format = precision_.grad_dtype;
    q.saturate = false;  // an F16 overflow stays inf, for the loss scaler to see
    backend_.quantize_roundtrip(q);
  };
  const ParameterTensors& g = grads_;
  if (l < 0) {
    for (const Tensor* t : {&g.wte, &g.wpe, &g.lnfw, &g.lnfb}) round(*t);
    return;
  }
  for (const Tensor* t : {&g.ln1w, &g.ln1b, &g.qkvw, &g.qkvb, &g.attprojw, &g.attprojb, &g.ln2w, &g.ln2b, &g.fcw, &g.fcb,
                          &g.fcprojw, &g.fcprojb})
    round((*t)[l]);
}

DropoutSpec GPT::dropout(const StepContext& ctx, uint32_t layer, RngSite site) const {
  DropoutSpec d;
  d.p = ctx.training ? static_cast<float>(config_.dropout) : 0.0f;
  d.stream = RngStream{ctx.seed, ctx.step, ctx.micro_step, layer, site};
  return d;
}

GPT::BlockViews GPT::block_views(int l, int B, int T) {
  const int64_t C = config_.n_embd, NH = config_.n_head;
  BlockViews v;
  for (int k = 0; k < kBlockTensors; ++k) {
    const int index = plan_.block_buffer[static_cast<size_t>(l)][k];
    if (index < 0) continue;
    Tensor full = acts_arena_.tensor(static_cast<size_t>(index));
    switch (static_cast<BlockTensor>(k)) {
      case BlockTensor::Qkv: v.t[k] = full.prefix({B, T, 3 * C}); break;
      case BlockTensor::Fch: case BlockTensor::FchGelu: v.t[k] = full.prefix({B, T, 4 * C}); break;
      case BlockTensor::Probs: v.t[k] = full.prefix({B, NH, T, T}); break;
      case BlockTensor::Ln1Mean: case BlockTensor::Ln1Rstd: case BlockTensor::Ln2Mean: case BlockTensor::Ln2Rstd:
        v.t[k] = full.prefix({B, T});
        break;
      default: v.t[k] = full.prefix({B, T, C});
    }
  }
  return v;
}

Tensor GPT::block_input(int l, int B, int T) {
  return l == 0 ? act("encoded", {B, T, config_.n_embd}) : block_views(l - 1, B, T)[BlockTensor::Out];
}

// out = in W^T + b for W [OC, IC]: 2 * rows * IC * OC FLOPs.
void GPT::linear(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias, double& flop_counter) {
  backend_.matmul({out, in, weight, bias, false, true});
  flop_counter += 2.0 * static_cast<double>(in.numel()) * static_cast<double>(weight.dim(0));
}

// din = dout W (overwritten), dW += dout^T in, db += column sums of dout.
void GPT::linear_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                          const Tensor& in, const Tensor& weight, int layer, Fp8Linear which) {
  Tensor grad = dout;
  if (layer >= 0 && fp8_block(layer) && fp8_->e5m2_backward()) {
    grad = acts_arena_.tensor("fp8.output_grad").elements(0, dout.numel()).reshaped({dout.dim(0), dout.dim(1), dout.dim(2)});
    fp8_->quantize(grad, dout, layer, which, Fp8Operand::OutputGrad);
  }
  backend_.matmul({din, grad, weight, Tensor()});
  round_to_compute(din);
  backend_.matmul({dweight, grad, in, Tensor(), true, false, 1.0f, 1.0f});
  if (!dbias.empty()) backend_.bias_backward({dbias, dout});
  flops_.backward += 4.0 * static_cast<double>(dout.numel()) * static_cast<double>(weight.dim(1));
}

void GPT::block_forward(int l, int B, int T, const StepContext& ctx, double& flop_counter) {
  const int64_t C = config_.n_embd;
  const auto ul = static_cast<uint32_t>(l);
  const ParameterTensors& p = compute_params();
  BlockViews v = block_views(l, B, T);
  Tensor in = block_input(l, B, T);
  Tensor branch = act("branch", {B, T, C});
  using K = BlockTensor;

  backend_.layernorm_forward({v[K::Ln1], v[K::Ln1Mean], v[K::Ln1Rstd], in, p.ln1w[l], p.ln1b[l]});
  store_gemm_input(v[K::Ln1], l, Fp8Linear::Qkv);
  linear(v[K::Qkv], v[K::Ln1], p.qkvw[l], p.qkvb[l], flop_counter);
  round_to_compute(v[K::Qkv]);
  backend_.attention_forward({v[K::Atty], v[K::Probs], v[K::Qkv], config_.n_head, dropout(ctx, ul, RngSite::AttentionProbs)});
  round_to_compute(v[K::Atty]);
  if (fp8_block(l)) store_gemm_input(v[K::Atty], l, Fp8Linear::AttnProj);
  flop_counter += 4.0 * B * static_cast<double>(T) * T * C;
  linear(branch, v[K::Atty], p.attprojw[l], p.attprojb[l], flop_counter);
  round_to_compute(branch);
  backend_.residual_forward({v[K::Residual2], in, branch, dropout(ctx, ul, RngSite::AttentionResidual)});
  round_to_compute(v[K::Residual2]);
  backend_.layernorm_forward({v[K::Ln2], v[K::Ln2Mean], v[K::Ln2Rstd], v[K::Residual2], p.ln2w[l], p.ln2b[l]});
  store_gemm_input(v[K::Ln2], l, Fp8Linear::Fc);
  linear(v[K::Fch], v[K::Ln2], p.fcw[l], p.fcb[l], flop_counter);
  round_to_compute(v[K::Fch]);
  backend_.gelu_forward({v[K::FchGelu], v[K::Fch]});
  store_gemm_input(v[K::FchGelu], l, Fp8Linear::FcProj);
  linear(branch, v[K::FchGelu], p.fcprojw[l], p.fcprojb[l], flop_counter);
  round_to_compute(branch);
  backend_.residual_forward({v[K::Out], v[K::Residual2], branch, dropout(ctx, ul, RngSite::MlpResidual)});
  round_to_compute(v[K::Out]);
}

void GPT::forward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B, int T,
                  const StepContext& ctx, float dloss) {
  GPT_CHECK(B >= 1 && B <= max_batch_ && T >= 1 && T <= max_seq_,
            "micro-batch {}x{} exceeds the planned {}x{}", B, T, max_batch_, max_seq_);
  GPT_CHECK(tokens.size() == static_cast<size_t>(B) * T, "expected {} tokens, got {}", B * T, tokens.size());
  GPT_CHECK(targets.empty() || targets.size() == tokens.size(), "expected {} targets, got {}", tokens.size(),
            targets.size());
  GPT_CHECK(dloss == 0.0f || !targets.empty(), "a training forward needs targets");
  const int64_t C = config_.n_embd, Vp = config_.padded_vocab_size();
  if (compute_arena_) refresh_compute_weights();
  const ParameterTensors& p = compute_params();

  Tensor tok = act("tokens", {B, T});
  backend_.copy_to_device(tok.data, tokens.data(), tok.bytes());
  Tensor encoded = act("encoded", {B, T, C});
  backend_.embedding_forward({encoded, tok, p.wte, p.wpe, dropout(ctx, 0, RngSite::Embedding)});
  round_to_compute(encoded);
  for (int l = 0; l < config_.n_layer; ++l) block_forward(l, B, T, ctx, flops_.forward);
  if (fp8_ && !ctx.training) fp8_->discard_step();
  Tensor lnf = act("lnf", {B, T, C});
  backend_.layernorm_forward({lnf, act("lnf_mean", {B, T}), act("lnf_rstd", {B, T}),
                              block_views(config_.n_layer - 1, B, T)[BlockTensor::Out], p.lnfw, p.lnfb});
  round_to_compute(lnf);
  Tensor logits = act("logits", {B, T, Vp});
  linear(logits, lnf, p.wte, Tensor(), flops_.forward);
  round_to_compute(logits);

  last_B_ = B;
  last_T_ = T;
  last_has_dlogits_ = false;
  if (targets.empty()) return;
  Tensor tgt = act("targets", {B, T});
  backend_.copy_to_device(tgt.data, targets.data(), tgt.bytes());
  CrossEntropyArgs ce;
  const int64_t N = static_cast<int64_t>(B) * T;
  ce.losses = act("losses", {N});
  ce.logits = logits.reshaped({N, Vp});
  ce.targets = tgt.reshaped({N});
  ce.vocab_size = config_.vocab_size;
  if (dloss > 0.0f) {
    ce.dlogits = ce.logits;
    ce.dloss = dloss;
    last_has_dlogits_ = true;
  }
  backend_.cross_entropy(ce);
  if (last_has_dlogits_) round_to_compute(ce.dlogits);
}

double GPT::loss_sum() { return host_sum(act("losses", {last_B_, last_T_})); }

double GPT::host_sum(const Tensor& t) {
  GPT_CHECK(t.bytes() <= host_staging_.size(), "host_sum of {} bytes exceeds the {}-byte staging buffer", t.bytes(),
            host_staging_.size());
  backend_.copy_to_host(host_staging_.data(), t.data, t.bytes());
  double sum = 0.0;
  if (t.dtype == DType::F64) {
    const auto* x = reinterpret_cast<const double*>(host_staging_.data());
    for (int64_t i = 0; i < t.numel(); ++i) sum += x[i];
  } else {
    const auto* x = reinterpret_cast<const float*>(host_staging_.data());
    for (int64_t i = 0; i < t.numel(); ++i) sum += x[i];
  }
  return sum;
}

std::vector<float> GPT::logits_at(int b, int t) {
  GPT_CHECK(!last_has_dlogits_, "logits were overwritten by a training forward");
  GPT_CHECK(b < last_B_ && t < last_T_, "position ({}, {}) outside the last forward's {}x{}", b, t, last_B_, last_T_);
  Tensor row = act("logits", {last_B_, last_T_, config_.padded_vocab_size()})[b][t].prefix({config_.vocab_size});
  std::vector<double> values = download(backend_, row);
  return std::vector<float>(values.begin(), values.end());
}

// Backward of one block. dresidual holds dL/d(block output) on entry and dL/d(block input) on exit.
// Activations the policy did not keep are rebuilt just before their first use, by the same ops on the
// same inputs with the same dropout streams, so they are bit for bit those of the forward pass.
void GPT::block_backward(int l, int B, int T, const StepContext& ctx) {
  const int64_t C = config_.n_embd;
  const auto ul = static_cast<uint32_t>(l);
  const ParameterTensors& p = compute_params();
  const ParameterTensors& g = grads_;
  const RecomputePolicy& policy = plan_.policy;
  using K = BlockTensor;
  if (policy.full(l)) {
    // The last block of a segment reruns the whole segment (rebuilding its outputs, and leaving its
    // own internals in the workspace); every other block reruns itself from the rebuilt input.
    const bool last_of_segment = l + 1 == policy.segment_end(l);
    for (int j = last_of_segment ? policy.segment_start(l) : l; j <= l; ++j) block_forward(j, B, T, ctx, flops_.recompute);
  }
  const bool selective = policy.selective(l);
  BlockViews v = block_views(l, B, T);
  Tensor in = block_input(l, B, T);
  Tensor dresidual = act("dresidual", {B, T, C}), dbranch = act("dbranch", {B, T, C}), datty = act("datty", {B, T, C});
  Tensor dqkv = act("dqkv", {B, T, 3 * C}), dfch = act("dfch", {B, T, 4 * C});

  backend_.residual_backward({dbranch, dresidual, dropout(ctx, ul, RngSite::MlpResidual)});
  round_to_compute(dbranch);
  if (selective && policy.gelu) {
    backend_.gelu_forward({v[K::FchGelu], v[K::Fch]});
    store_gemm_input(v[K::FchGelu], l, Fp8Linear::FcProj);
  }
  linear_backward(dfch, g.fcprojw[l], g.fcprojb[l], dbranch, v[K::FchGelu], p.fcprojw[l], l, Fp8Linear::FcProj);
  backend_.gelu_backward({dfch, dfch, v[K::Fch]});
  round_to_compute(dfch);
  if (selective && policy.layernorm) {
    backend_.layernorm_forward({v[K::Ln2], v[K::Ln2Mean], v[K::Ln2Rstd], v[K::Residual2], p.ln2w[l], p.ln2b[l]});
    store_gemm_input(v[K::Ln2], l, Fp8Linear::Fc);
  }
  linear_backward(dbranch, g.fcw[l], g.fcb[l], dfch, v[K::Ln2], p.fcw[l], l, Fp8Linear::Fc);
  backend_.layernorm_backward({dresidual, g.ln2w[l], g.ln2b[l], dbranch, v[K::Residual2], p.ln2w[l], v[K::Ln2Mean],
                               v[K::Ln2Rstd]});
  round_to_compute(dresidual);

  backend_.residual_backward({dbranch, dresidual, dropout(ctx, ul, RngSite::AttentionResidual)});
  round_to_compute(dbranch);
  linear_backward(datty, g.attprojw[l], g.attprojb[l], dbranch, v[K::Atty], p.attprojw[l], l, Fp8Linear::AttnProj);
  if (selective && policy.attention) {
    backend_.attention_forward({v[K::Atty], v[K::Probs], v[K::Qkv], config_.n_head, dropout(ctx, ul, RngSite::AttentionProbs)});
    round_to_compute(v[K::Atty]);
    flops_.recompute += 4.0 * B * static_cast<double>(T) * T * C;
  }
  Tensor dprobs = v[K::Probs].empty() ? Tensor() : act("dprobs", {B, config_.n_head, T, T});
  backend_.attention_backward({dqkv, dprobs, datty, v[K::Qkv], v[K::Probs], config_.n_head,
                               dropout(ctx, ul, RngSite::AttentionProbs)});
  round_to_compute(dqkv);
  flops_.backward += 8.0 * B * static_cast<double>(T) * T * C;
  if (selective && policy.layernorm) {
    backend_.layernorm_forward({v[K::Ln1], v[K::Ln1Mean], v[K::Ln1Rstd], in, p.ln1w[l], p.ln1b[l]});
    store_gemm_input(v[K::Ln1], l, Fp8Linear::Qkv);
  }
  linear_backward(dbranch, g.qkvw[l], g.qkvb[l], dqkv, v[K::Ln1], p.qkvw[l], l, Fp8Linear::Qkv);
  backend_.layernorm_backward({dresidual, g.ln1w[l], g.ln1b[l], dbranch, in, p.ln1w[l], v[K::Ln1Mean], v[K::Ln1Rstd]});
  round_to_compute(dresidual);
}

void GPT::backward(const StepContext& ctx, const std::function<void(int block)>& on_gradients_ready) {
  GPT_CHECK(last_has_dlogits_, "backward needs a preceding training forward (with targets and dloss > 0)");
  const int B = last_B_, T = last_T_;
  const int64_t C = config_.n_embd, Vp = config_.padded_vocab_size();
  const ParameterTensors& p = compute_params();
  const ParameterTensors& g = grads_;
  Tensor dresidual = act("dresidual", {B, T, C}), dbranch = act("dbranch", {B, T, C});

  // LM head, tied to wte: logits = lnf wte^T.
  linear_backward(dbranch, g.wte, Tensor(), act("logits", {B, T, Vp}), act("lnf", {B, T, C}), p.wte);
  backend_.fill({dresidual, 0.0f});
  backend_.layernorm_backward({dresidual, g.lnfw, g.lnfb, dbranch, block_views(config_.n_layer - 1, B, T)[BlockTensor::Out],
                               p.lnfw, act("lnf_mean", {B, T}), act("lnf_rstd", {B, T})});
  round_to_compute(dresidual);
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    block_backward(l, B, T, ctx);
    round_gradients(l);
    if (on_gradients_ready) on_gradients_ready(l);
  }
  backend_.embedding_backward({g.wte, g.wpe, dresidual, act("tokens", {B, T}), dropout(ctx, 0, RngSite::Embedding)});
  round_gradients(-1);
  if (on_gradients_ready) on_gradients_ready(-1);
}

void GPT::zero_grads() { backend_.fill({gradients_flat(), 0.0f}); }

Tensor GPT::gradients_flat() {
  const size_t bytes = grads_arena_.layout().total_bytes();
  return Tensor(grads_arena_.base(), {static_cast<int64_t>(bytes / dtype_size(dtype_))}, dtype_, backend_.device());
}

double GPT::gradient_norm_squared() {
  Tensor out = act("sum_squares", {1});
  backend_.sum_of_squares({out, gradients_flat()});
  return host_sum(out);
}

}  // namespace gpt

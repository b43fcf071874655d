#include "model/gpt.h"

#include "core/random.h"
#include "precision/float_formats.h"

#include <algorithm>
#include <cmath>

namespace gpt {
namespace {

// Host <-> backend transfers. A download reads any float format (an FP8 tensor times its scale_inv, read
// with it); an upload writes the masters, F32 or F64.
std::vector<double> download(Backend& backend, const Tensor& t) {
  std::vector<std::byte> raw(t.bytes());
  backend.copy_to_host(raw.data(), t.data, t.bytes());
  double scale_inv = 1.0;
  if (t.scaling) {
    Fp8Meta meta;
    backend.copy_to_host(&meta, t.scaling, sizeof meta);
    scale_inv = meta.scale_inv;
  }
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = decode_element(t.dtype, raw.data(), i) * scale_inv;
  return out;
}

void upload(Backend& backend, const Tensor& t, std::span<const double> values) {
  GPT_CHECK(values.size() == static_cast<size_t>(t.numel()), "upload of {} values into a tensor of {}", values.size(),
            t.numel());
  if (t.dtype == DType::F64) {
    backend.copy_to_device(t.data, values.data(), t.bytes());
  } else if (t.dtype == DType::BF16 || t.dtype == DType::F16) {
    // A LoRA base held in its compute format: each FP32 value rounded to nearest even, as a cast would.
    std::vector<uint16_t> codes(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const auto v = static_cast<float>(values[i]);
      codes[i] = t.dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
    }
    backend.copy_to_device(t.data, codes.data(), t.bytes());
  } else {
    std::vector<float> tmp(values.begin(), values.end());
    backend.copy_to_device(t.f32(), tmp.data(), t.bytes());
  }
}

}  // namespace

GPT::GPT(const ModelConfig& config, int batch_size, int seq_len, Backend& backend, DType dtype,
         const RecomputePolicy& recompute, const PrecisionRecipe& precision, const LoraSpec& lora,
         Backend* masters_host)
    : config_(config),
      lora_(lora),
      backend_(backend),
      masters_backend_(masters_host ? *masters_host : backend),
      dtype_(dtype),
      max_batch_(batch_size),
      max_seq_(seq_len),
      precision_(precision, config.n_layer, dtype),
      layout_(lora.enabled() ? lora_parameter_layout(config, lora, dtype) : ParameterLayout(config, dtype)),
      grads_layout_(lora.enabled() ? lora_parameter_layout(config, lora, precision_.gradient())
                                   : ParameterLayout(config, precision_.gradient())),
      plan_(plan_activations(config, precision_, {batch_size, seq_len}, backend.attention_keeps_probs(), recompute,
                             backend.capabilities().stages_fp8_operands)),
      params_arena_(layout_.arena_layout(), masters_backend_, masters_host ? &backend : nullptr),
      grads_arena_(grads_layout_.arena_layout(), backend),
      acts_arena_(plan_.layout, backend),
      host_staging_(static_cast<size_t>(batch_size) * seq_len * dtype_size(precision_.statistics())) {
  GPT_CHECK(config.n_embd % config.n_head == 0, "n_head {} does not divide n_embd {}", config.n_head, config.n_embd);
  GPT_CHECK(seq_len <= config.context_length, "seq_len {} exceeds context_length {}", seq_len, config.context_length);
  if (lora.enabled()) {
    GPT_CHECK(precision.recipe != RecipeKind::Fp8, "LoRA with the fp8 recipe is not supported: use bf16 or fp32");
    base_layout_ = std::make_unique<ParameterLayout>(config, precision_.compute());
    base_arena_ = std::make_unique<Arena>(base_layout_->arena_layout(), backend_);
    params_ = base_layout_->views(*base_arena_);
    compute_ = base_layout_->model_views(*base_arena_, config.n_layer);
    lora_masters_ = lora_block_views(params_arena_, lora, config.n_layer);
    lora_grads_ = lora_block_views(grads_arena_, lora, config.n_layer);
    if (precision_.compute_weights()) {
      lora_compute_arena_ = std::make_unique<Arena>(lora_parameter_layout(config, lora, precision_.compute()).arena_layout(), backend_);
      lora_compute_ = lora_block_views(*lora_compute_arena_, lora, config.n_layer);
    } else {
      lora_compute_ = lora_masters_;
    }
    lora_scratch_ = std::make_unique<Arena>(
        lora_scratch_layout(config, lora, static_cast<int64_t>(batch_size) * seq_len, precision_.compute(), precision_.gradient()),
        backend_);
    lora_products_ = std::make_unique<LoraProducts>(backend_, *lora_scratch_, lora);
    // The frozen weights get no gradients: the products skip them, and LayerNorm's op, which always
    // accumulates its parameters' gradients, writes into sinks that nothing reads.
    grad_blocks_.blocks.resize(static_cast<size_t>(config.n_layer));
    const Tensor sink_w = lora_products_->frozen_weight_sink(), sink_b = lora_products_->frozen_bias_sink();
    grad_blocks_.lnfw = sink_w;
    grad_blocks_.lnfb = sink_b;
    for (BlockParameters& g : grad_blocks_.blocks) g.ln1w = g.ln2w = sink_w, g.ln1b = g.ln2b = sink_b;
  } else {
    params_ = layout_.views(params_arena_);
    grads_ = grads_layout_.views(grads_arena_);
    masters_ = layout_.model_views(params_arena_, config.n_layer);
    grad_blocks_ = grads_layout_.model_views(grads_arena_, config.n_layer);
  }
  if (!lora.enabled() && precision_.compute_weights()) {
    compute_arena_ = std::make_unique<Arena>(compute_weights_layout(layout_, precision_), backend_);
    compute_ = compute_weight_views(*compute_arena_, config.n_layer);
  } else if (!lora.enabled()) {
    compute_ = masters_;
  }
  if (masters_host) {
    // Without a compute copy the products would read the masters, and LoRA's masters are adapters of a few
    // MiB: in both cases there is nothing to take off the device.
    GPT_CHECK(compute_arena_ != nullptr,
              "the FP32 masters can leave the device only under a recipe with a compute copy (bf16, fp16, fp8) "
              "and without LoRA; this model has {}{}",
              precision.recipe == RecipeKind::Fp32 ? "the fp32 recipe" : "a narrow recipe",
              lora.enabled() ? " and LoRA adapters" : "");
    masters_on_host_ = true;
    switch (host_masters_path(precision.recipe == RecipeKind::Fp8, backend.capabilities().device_memory_is_host)) {
      case HostMastersPath::Direct: break;
      case HostMastersPath::HostCopy:
        host_compute_ = std::make_unique<Arena>(compute_weights_layout(layout_, precision_), *masters_host, &backend);
        host_compute_views_ = compute_weight_views(*host_compute_, config.n_layer);
        break;
      case HostMastersPath::Staging:
        master_staging_ = std::make_unique<Arena>(master_staging_layout(layout_, config.n_layer), backend_);
        break;
    }
    part_fresh_.assign(static_cast<size_t>(config.n_layer) + 1, false);
  }
  // Zero everything once, alignment gaps included, so flat reductions over an arena are exact.
  auto zero = [](Arena* arena, Backend& owner) {
    if (arena && arena->layout().total_bytes() > 0)
      owner.fill({Tensor(arena->base(), {static_cast<int64_t>(arena->layout().total_bytes() / 4)}, DType::F32,
                         owner.device()),
                  0.0f});
  };
  zero(&params_arena_, masters_backend_);
  zero(host_compute_.get(), masters_backend_);
  for (Arena* arena : {&grads_arena_, &acts_arena_, compute_arena_.get(), master_staging_.get(), base_arena_.get(),
                       lora_compute_arena_.get(), lora_scratch_.get()})
    zero(arena, backend_);
  if (precision.recipe == RecipeKind::Fp8) {
    fp8_ = std::make_unique<Fp8State>(precision_, backend_);
    // An FP8 block's linear weights carry their scaling slots.
    for (int l = 0; l < config.n_layer; ++l) {
      BlockParameters& w = compute_.blocks[static_cast<size_t>(l)];
      for (auto [member, name] : {std::pair{&BlockParameters::qkvw, "qkvw"}, std::pair{&BlockParameters::attprojw, "attprojw"},
                                  std::pair{&BlockParameters::fcw, "fcw"}, std::pair{&BlockParameters::fcprojw, "fcprojw"}}) {
        const int slot = precision_.compute_weight(name, l).slot;
        if (slot >= 0) (w.*member).scaling = fp8_->meta(slot);
      }
    }
  }
}

GPT::~GPT() = default;

void GPT::init_weights(uint64_t seed) {
  mark_compute_stale();
  const ParameterLayout& layout = base_layout();
  Arena& arena = lora_.enabled() ? *base_arena_ : params_arena_;
  Backend& owner = lora_.enabled() ? backend_ : masters_backend_;
  const auto& specs = layout.specs();
  const double residual_std = config_.init_std / std::sqrt(2.0 * config_.n_layer);
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& spec = specs[i];
    Tensor t = arena.tensor(i);
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
    upload(owner, t, values);
  }
  if (lora_.enabled()) init_adapters(seed);
}

void GPT::init_adapters(uint64_t seed) {
  GPT_CHECK(lora_.enabled(), "init_adapters: the model has no LoRA adapters");
  mark_compute_stale();
  const auto& specs = layout_.specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    Tensor t = params_arena_.tensor(i);
    std::vector<double> values(static_cast<size_t>(t.numel()), 0.0);
    if (specs[i].name.ends_with(".lora_a")) {
      // Streams above the base's tensor indices, so the base's draws do not depend on the adapters.
      HostRng rng(seed, static_cast<uint32_t>(1000 + i));
      const double bound = 1.0 / std::sqrt(static_cast<double>(t.dim(2)));
      for (double& v : values) v = bound * (2.0 * rng.uniform() - 1.0);
    }
    upload(masters_backend_, t, values);
  }
}

std::vector<float> GPT::base_to_host() {
  if (!lora_.enabled()) return parameters_to_host();
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(num_base_parameters()));
  for (size_t i = 0; i < base_layout_->specs().size(); ++i) {
    std::vector<double> values = download(backend_, base_arena_->tensor(i));
    flat.insert(flat.end(), values.begin(), values.end());
  }
  return flat;
}

void GPT::base_from_host(std::span<const float> flat) {
  if (!lora_.enabled()) return parameters_from_host(flat);
  GPT_CHECK(flat.size() == static_cast<size_t>(num_base_parameters()), "expected {} base parameters, got {}",
            num_base_parameters(), flat.size());
  size_t offset = 0;
  for (size_t i = 0; i < base_layout_->specs().size(); ++i) {
    Tensor t = base_arena_->tensor(i);
    const size_t n = static_cast<size_t>(t.numel());
    std::vector<double> values(flat.begin() + offset, flat.begin() + offset + n);
    upload(backend_, t, values);
    offset += n;
  }
}

std::vector<float> GPT::parameters_to_host() {
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(num_parameters()));
  for (size_t i = 0; i < layout_.specs().size(); ++i) {
    std::vector<double> values = download(masters_backend_, params_arena_.tensor(i));
    flat.insert(flat.end(), values.begin(), values.end());
  }
  return flat;
}

void GPT::parameters_from_host(std::span<const float> flat) {
  GPT_CHECK(flat.size() == static_cast<size_t>(num_parameters()), "expected {} parameters, got {}", num_parameters(),
            flat.size());
  mark_compute_stale();
  size_t offset = 0;
  for (size_t i = 0; i < layout_.specs().size(); ++i) {
    Tensor t = params_arena_.tensor(i);
    const size_t n = static_cast<size_t>(t.numel());
    std::vector<double> values(flat.begin() + offset, flat.begin() + offset + n);
    upload(masters_backend_, t, values);
    offset += n;
  }
}

void GPT::cast_fp8(const Tensor& dst, const Tensor& src) {
  if (!fp8_->delayed()) backend_.fp8_current_scale({src, dst.scaling, dst.dtype, fp8_->margin()});
  backend_.cast({dst, src});
  fp8_->count(dst.scaling, src.numel());
}

template <class Produce>
void GPT::produce(int l, BlockTensor t, const Tensor& dst, Produce&& op) {
  const DType source = precision_.source(l, t);
  if (source == dst.dtype) {
    op(dst);
    if (dst.scaling) fp8_->count(dst.scaling, dst.numel());
    return;
  }
  const ModelTensor staging = source == precision_.compute() ? ModelTensor::Branch : ModelTensor::Fp8Source;
  const Tensor buffer = acts_arena_.tensor(static_cast<size_t>(plan_.model_buffer[static_cast<size_t>(staging)]));
  Tensor src = dst;
  src.data = buffer.data;
  src.dtype = source;
  src.scaling = nullptr;
  GPT_CHECK(src.bytes() <= buffer.bytes(), "{} {} does not fit the {} staging buffer", block_tensor_name(t),
            dst.shape_string(), model_tensor_name(staging));
  op(src);
  cast_fp8(dst, src);
}

std::vector<ComputeCopySlice> GPT::compute_copy_slices() {
  if (!compute_arena_ || fp8_ || lora_.enabled()) return {};
  return gpt::compute_copy_slices(layout_, host_compute_ ? *host_compute_ : *compute_arena_, config_.n_layer);
}

void GPT::refresh_compute_weights() {
  if (lora_.enabled()) {
    for (size_t i = 0; i < layout_.specs().size(); ++i)
      backend_.cast({lora_compute_arena_->tensor(i), params_arena_.tensor(i)});
    compute_stale_ = false;
    return;
  }
  // The masters may have changed since the last forward (an optimizer step, a load): every part that the
  // update has not written already is cast now.
  for (int part = -1; part < config_.n_layer; ++part) {
    const size_t index = static_cast<size_t>(part < 0 ? config_.n_layer : part);
    if (part_fresh_.empty() || !part_fresh_[index]) cast_part(part);
  }
  // The forward reads what crossed the bus.
  if (host_compute_) backend_.order_after_transfers();
  compute_stale_ = false;
  part_fresh_.assign(part_fresh_.size(), false);
}

Tensor GPT::master_bounce_buffer() {
  GPT_CHECK(masters_on_host_, "master_bounce_buffer: the masters are on the device, which reaches them itself");
  if (master_staging_) return master_staging_->tensor(0);
  // Masters on the host imply a compute copy (the constructor's check).
  mark_compute_stale();
  return Tensor(compute_arena_->base(), {static_cast<int64_t>(compute_arena_->layout().total_bytes())}, DType::U8,
                backend_.device());
}

void GPT::compute_part_written(int block) {
  GPT_CHECK(masters_on_host_ && !fp8_, "compute_part_written: only a model with its masters on the host, "
            "outside fp8, has its compute copy written by the host's update");
  GPT_CHECK(block >= -1 && block < config_.n_layer, "compute_part_written: block {} outside [-1, {})", block,
            config_.n_layer);
  if (host_compute_)
    for_each_part_tensor(block, [&](const Tensor& dst, const Tensor&, const Tensor& twin) {
      backend_.transfer_to_device(dst.data, twin.data, dst.bytes());
    });
  part_fresh_[static_cast<size_t>(block < 0 ? config_.n_layer : block)] = true;
}

template <class F>
void GPT::for_each_part_tensor(int block, F&& f) {
  const ModelParameters* twin = host_compute_ ? &host_compute_views_ : nullptr;
  if (block < 0) {
    for (Tensor ModelParameters::* member : {&ModelParameters::wte, &ModelParameters::wpe, &ModelParameters::lnfw,
                                             &ModelParameters::lnfb})
      f(compute_.*member, masters_.*member, twin ? twin->*member : Tensor{});
    return;
  }
  const auto b = static_cast<size_t>(block);
  for (Tensor BlockParameters::* member :
       {&BlockParameters::ln1w, &BlockParameters::ln1b, &BlockParameters::qkvw, &BlockParameters::qkvb,
        &BlockParameters::attprojw, &BlockParameters::attprojb, &BlockParameters::ln2w, &BlockParameters::ln2b,
        &BlockParameters::fcw, &BlockParameters::fcb, &BlockParameters::fcprojw, &BlockParameters::fcprojb})
    f(compute_.blocks[b].*member, masters_.blocks[b].*member, twin ? twin->blocks[b].*member : Tensor{});
}

// FP8 weights are cast from the FP32 masters with their scales, as the GPU casts them, not from BF16.
void GPT::cast_part(int block) {
  for_each_part_tensor(block, [&](const Tensor& dst, const Tensor& src, const Tensor& twin) { cast_master(dst, src, twin); });
}

void GPT::cast_master(const Tensor& dst, const Tensor& src, const Tensor& twin) {
  auto cast = [&](const Tensor& to, const Tensor& from) {
    if (to.scaling) cast_fp8(to, from);
    else backend_.cast({to, from});
  };
  if (host_compute_) {
    // The host's cast (the same rounding as the device's) into the copy's twin, which crosses in the
    // compute format; the copy starts once the ops queued before it, which may read dst, have run.
    masters_backend_.cast({twin, src});
    backend_.transfer_to_device(dst.data, twin.data, dst.bytes());
    return;
  }
  if (!master_staging_) return cast(dst, src);
  // A cast is elementwise, so a tensor cast piece by piece gets the bits it gets whole; a scaled one (an FP8
  // weight, whose current scale is the amax of all of it) is a block slice, which the staging holds.
  const Tensor staging = master_staging_->tensor(0);
  GPT_CHECK(!dst.scaling || src.numel() <= staging.numel(),
            "the FP8 weight {} ({} elements) does not fit the {}-element master staging buffer", dst.shape_string(),
            src.numel(), staging.numel());
  for (int64_t begin = 0; begin < src.numel(); begin += staging.numel()) {
    const int64_t n = std::min(staging.numel(), src.numel() - begin);
    const Tensor piece = staging.elements(0, n);
    // The copy starts once the casts queued before it, which read the staging buffer, have run; the cast
    // after it waits for it to land.
    backend_.transfer_to_device(piece.data, src.elements(begin, n).data, piece.bytes());
    backend_.order_after_transfers();
    cast(dst.elements(begin, n), piece);
  }
}

DropoutSpec GPT::dropout(const StepContext& ctx, uint32_t layer, RngSite site) const {
  DropoutSpec d;
  d.p = ctx.training ? static_cast<float>(config_.dropout) : 0.0f;
  d.stream = RngStream{ctx.seed, ctx.step, ctx.micro_step, layer, site};
  return d;
}

Tensor GPT::view(int buffer, std::initializer_list<int64_t> dims, TensorFormat format) {
  GPT_CHECK(buffer >= 0, "activation buffer not planned for this configuration");
  const Tensor full = acts_arena_.tensor(static_cast<size_t>(buffer));
  Tensor t(full.data, dims, format.dtype, full.device);
  GPT_CHECK(t.bytes() <= full.bytes(), "view {} {} does not fit in activation buffer {} of {} bytes", t.shape_string(),
            dtype_name(t.dtype), acts_arena_.layout().buffer(static_cast<size_t>(buffer)).name, full.bytes());
  if (format.slot >= 0) t.scaling = fp8_->meta(format.slot);
  return t;
}

Tensor GPT::act(ModelTensor t, std::initializer_list<int64_t> dims) {
  return view(plan_.model_buffer[static_cast<size_t>(t)], dims, precision_.model(t));
}

GPT::BlockViews GPT::block_views(int l, int B, int T) {
  const int64_t C = config_.n_embd, NH = config_.n_head;
  BlockViews v;
  for (int k = 0; k < kBlockTensors; ++k) {
    const int index = plan_.block_buffer[static_cast<size_t>(l)][k];
    if (index < 0) continue;
    const auto kind = static_cast<BlockTensor>(k);
    const TensorFormat f = precision_.block(l, kind);
    switch (kind) {
      case BlockTensor::Qkv: v.t[k] = view(index, {B, T, 3 * C}, f); break;
      case BlockTensor::Fch: case BlockTensor::FchGelu: v.t[k] = view(index, {B, T, 4 * C}, f); break;
      case BlockTensor::Probs:  // the probabilities, or a fused attention's log-sum-exp per row
        v.t[k] = backend_.attention_keeps_probs() ? view(index, {B, NH, T, T}, f) : view(index, {B, NH, T}, f);
        break;
      case BlockTensor::Ln1Mean: case BlockTensor::Ln1Rstd: case BlockTensor::Ln2Mean: case BlockTensor::Ln2Rstd:
        v.t[k] = view(index, {B, T}, f);
        break;
      default: v.t[k] = view(index, {B, T, C}, f);
    }
  }
  return v;
}

Tensor GPT::block_input(int l, int B, int T) {
  return l == 0 ? act(ModelTensor::Encoded, {B, T, config_.n_embd}) : block_views(l - 1, B, T)[BlockTensor::Out];
}

// out = in W^T + b for W [OC, IC]: 2 * rows * IC * OC FLOPs.
void GPT::linear(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias, double& flop_counter) {
  MatmulArgs product{out, in, weight, bias, false, true};
  product.staging = matmul_staging();
  backend_.matmul(product);
  flop_counter += 2.0 * static_cast<double>(in.numel()) * static_cast<double>(weight.dim(0));
}

Tensor GPT::matmul_staging() {
  return plan_.matmul_staging < 0 ? Tensor() : acts_arena_.tensor(static_cast<size_t>(plan_.matmul_staging));
}

// din = dout W (overwritten), dW += dout^T in, db += column sums of dout.
void GPT::linear_backward(const Tensor& din, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                          const Tensor& in, const Tensor& weight, int layer, Fp8Linear which) {
  Tensor grad = dout;
  if (layer >= 0) {
    const TensorFormat f = precision_.output_grad(layer, which);
    if (f.slot >= 0) {
      grad = view(plan_.model_buffer[static_cast<size_t>(ModelTensor::Fp8OutputGrad)], {dout.dim(0), dout.dim(1), dout.dim(2)}, f);
      cast_fp8(grad, dout);
    }
  }
  MatmulArgs input_grad{din, grad, weight, Tensor()};
  input_grad.staging = matmul_staging();
  backend_.matmul(input_grad);
  // A frozen (LoRA base) weight has no gradient to accumulate.
  if (!dweight.empty()) {
    MatmulArgs weight_grad{dweight, grad, in, Tensor(), true, false, 1.0f, 1.0f};
    weight_grad.staging = input_grad.staging;
    backend_.matmul(weight_grad);
  }
  if (!dbias.empty()) backend_.bias_backward({dbias, dout});
  flops_.backward += (dweight.empty() ? 2.0 : 4.0) * static_cast<double>(dout.numel()) * static_cast<double>(weight.dim(1));
}

DropoutSpec GPT::lora_dropout(const StepContext& ctx, uint32_t layer, LoraTarget t) const {
  DropoutSpec d;
  d.p = ctx.training ? static_cast<float>(lora_.dropout) : 0.0f;
  // The four LoRA sites follow RngSite's enumerators (1-4), so their masks are streams of their own.
  d.stream = RngStream{ctx.seed, ctx.step, ctx.micro_step, layer, static_cast<RngSite>(5 + static_cast<uint32_t>(t))};
  return d;
}

void GPT::lora_forward(int l, LoraTarget t, const Tensor& out, const Tensor& in, const StepContext& ctx,
                       double& flop_counter) {
  if (!lora_.enabled() || !lora_.has(t)) return;
  const LoraBlock& w = lora_compute_[static_cast<size_t>(l)];
  const auto k = static_cast<size_t>(t);
  lora_products_->forward(out, in, w.a[k], w.b[k], lora_dropout(ctx, static_cast<uint32_t>(l), t), flop_counter);
}

void GPT::lora_inference(int l, LoraTarget t, const Tensor& out, const Tensor& in) {
  StepContext ctx;
  ctx.training = false;
  double flops = 0.0;
  lora_forward(l, t, out, in, ctx, flops);
}

void GPT::lora_backward(int l, LoraTarget t, const Tensor& din, const Tensor& dout, const Tensor& in,
                        const StepContext& ctx) {
  if (!lora_.enabled() || !lora_.has(t)) return;
  const LoraBlock &w = lora_compute_[static_cast<size_t>(l)], &g = lora_grads_[static_cast<size_t>(l)];
  const auto k = static_cast<size_t>(t);
  lora_products_->backward(din, dout, in, w.a[k], w.b[k], g.a[k], g.b[k], lora_dropout(ctx, static_cast<uint32_t>(l), t),
                           flops_.backward);
}

// Each residual add is fused with the LayerNorm that reads its sum (residual_layernorm_forward): ln2
// inside the block, and, with norm_next, the next block's ln1 (or lnf after the last block) at its end.
// ln1_ready says that the previous block's call did this one's ln1. A recompute leaves norm_next off
// for the last block it reruns: the next block's ln1 may share its buffer with this block's own.
void GPT::block_forward(int l, int B, int T, const StepContext& ctx, double& flop_counter, bool ln1_ready,
                        bool norm_next) {
  const int64_t C = config_.n_embd;
  const auto ul = static_cast<uint32_t>(l);
  const BlockParameters& p = compute_.blocks[static_cast<size_t>(l)];
  BlockViews v = block_views(l, B, T);
  Tensor in = block_input(l, B, T);
  Tensor branch = act(ModelTensor::Branch, {B, T, C});
  using K = BlockTensor;

  if (!ln1_ready) {
    produce(l, K::Ln1, v[K::Ln1], [&](const Tensor& out) {
      backend_.layernorm_forward({out, v[K::Ln1Mean], v[K::Ln1Rstd], in, p.ln1w, p.ln1b});
    });
  }
  linear(v[K::Qkv], v[K::Ln1], p.qkvw, p.qkvb, flop_counter);
  lora_forward(l, LoraTarget::Qkv, v[K::Qkv], v[K::Ln1], ctx, flop_counter);
  produce(l, K::Atty, v[K::Atty], [&](const Tensor& out) {
    backend_.attention_forward({out, v[K::Probs], v[K::Qkv], config_.n_head, dropout(ctx, ul, RngSite::AttentionProbs)});
  });
  flop_counter += 4.0 * B * static_cast<double>(T) * T * C;
  linear(branch, v[K::Atty], p.attprojw, p.attprojb, flop_counter);
  lora_forward(l, LoraTarget::AttnProj, branch, v[K::Atty], ctx, flop_counter);
  const ResidualForwardArgs attention_residual{v[K::Residual2], in, branch, dropout(ctx, ul, RngSite::AttentionResidual)};
  produce(l, K::Ln2, v[K::Ln2], [&](const Tensor& out) {
    backend_.residual_layernorm_forward(
        {attention_residual, {out, v[K::Ln2Mean], v[K::Ln2Rstd], v[K::Residual2], p.ln2w, p.ln2b}});
  });
  linear(v[K::Fch], v[K::Ln2], p.fcw, p.fcb, flop_counter);
  lora_forward(l, LoraTarget::Fc, v[K::Fch], v[K::Ln2], ctx, flop_counter);
  produce(l, K::FchGelu, v[K::FchGelu], [&](const Tensor& out) { backend_.gelu_forward({out, v[K::Fch]}); });
  linear(branch, v[K::FchGelu], p.fcprojw, p.fcprojb, flop_counter);
  lora_forward(l, LoraTarget::FcProj, branch, v[K::FchGelu], ctx, flop_counter);
  const ResidualForwardArgs mlp_residual{v[K::Out], v[K::Residual2], branch, dropout(ctx, ul, RngSite::MlpResidual)};
  if (!norm_next) {
    backend_.residual_forward(mlp_residual);
  } else if (l + 1 < config_.n_layer) {
    const BlockParameters& next = compute_.blocks[static_cast<size_t>(l + 1)];
    BlockViews nv = block_views(l + 1, B, T);
    produce(l + 1, K::Ln1, nv[K::Ln1], [&](const Tensor& out) {
      backend_.residual_layernorm_forward(
          {mlp_residual, {out, nv[K::Ln1Mean], nv[K::Ln1Rstd], v[K::Out], next.ln1w, next.ln1b}});
    });
  } else {
    backend_.residual_layernorm_forward({mlp_residual,
                                         {act(ModelTensor::Lnf, {B, T, C}), act(ModelTensor::LnfMean, {B, T}),
                                          act(ModelTensor::LnfRstd, {B, T}), v[K::Out], compute_.lnfw, compute_.lnfb}});
  }
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
  // The compute copy is cast again only when the masters may have changed (compute_stale_), and under
  // fp8 at each step's first training forward, whose casts are part of the step's scaling record (their
  // amaxes and counts; delayed scales change between steps even when a skipped step left the masters),
  // and at every forward outside training: an evaluation's or a decoder's discarded statistics re-upload
  // the scaling table, which under current scaling replaces the scales the weights were cast with.
  // The other micro-batches of a step multiply the copy the first one made.
  const bool fp8_recast = fp8_ && (!ctx.training || ctx.micro_step == 0);
  if ((compute_arena_ || lora_compute_arena_) && (compute_stale_ || fp8_recast)) refresh_compute_weights();
  const ModelParameters& p = compute_;

  Tensor tok = act(ModelTensor::Tokens, {B, T});
  backend_.copy_to_device(tok.data, tokens.data(), tok.bytes());
  Tensor encoded = act(ModelTensor::Encoded, {B, T, C});
  backend_.embedding_forward({encoded, tok, p.wte, p.wpe, dropout(ctx, 0, RngSite::Embedding)});
  // Block l's end normalises its output for block l + 1, the last block's for lnf.
  for (int l = 0; l < config_.n_layer; ++l) block_forward(l, B, T, ctx, flops_.forward, l > 0, true);
  if (fp8_ && !ctx.training) fp8_->discard_step();
  Tensor lnf = act(ModelTensor::Lnf, {B, T, C});
  Tensor logits = act(ModelTensor::Logits, {B, T, Vp});
  linear(logits, lnf, p.wte, Tensor(), flops_.forward);

  last_B_ = B;
  last_T_ = T;
  last_has_dlogits_ = false;
  if (targets.empty()) return;
  Tensor tgt = act(ModelTensor::Targets, {B, T});
  backend_.copy_to_device(tgt.data, targets.data(), tgt.bytes());
  CrossEntropyArgs ce;
  const int64_t N = static_cast<int64_t>(B) * T;
  ce.losses = act(ModelTensor::Losses, {N});
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

double GPT::loss_sum() { return host_sum(act(ModelTensor::Losses, {last_B_, last_T_})); }

double GPT::host_sum(const Tensor& t) {
  GPT_CHECK(t.bytes() <= host_staging_.size(), "host_sum of {} bytes exceeds the {}-byte staging buffer", t.bytes(),
            host_staging_.size());
  backend_.copy_to_host(host_staging_.data(), t.data, t.bytes());
  double sum = 0.0;
  for (int64_t i = 0; i < t.numel(); ++i) sum += decode_element(t.dtype, host_staging_.data(), static_cast<size_t>(i));
  return sum;
}

std::vector<float> GPT::logits_at(int b, int t) {
  GPT_CHECK(!last_has_dlogits_, "logits were overwritten by a training forward");
  GPT_CHECK(b < last_B_ && t < last_T_, "position ({}, {}) outside the last forward's {}x{}", b, t, last_B_, last_T_);
  Tensor row = act(ModelTensor::Logits, {last_B_, last_T_, config_.padded_vocab_size()})[b][t].prefix({config_.vocab_size});
  std::vector<double> values = download(backend_, row);
  return std::vector<float>(values.begin(), values.end());
}

// Backward of one block. dresidual holds dL/d(block output) on entry and dL/d(block input) on exit;
// dbranch holds, on entry, the gradient of the block's MLP branch output (the LayerNorm backward above
// took it from dresidual in the same pass, layernorm_residual_backward), and on exit that of the block
// below (none below block 0).
// Activations the policy did not keep are rebuilt just before their first use, by the same ops on the
// same inputs with the same dropout streams, so they are bit for bit those of the forward pass.
void GPT::block_backward(int l, int B, int T, const StepContext& ctx) {
  const int64_t C = config_.n_embd;
  const auto ul = static_cast<uint32_t>(l);
  const BlockParameters& p = compute_.blocks[static_cast<size_t>(l)];
  const BlockParameters& g = grad_blocks_.blocks[static_cast<size_t>(l)];
  const RecomputePolicy& policy = plan_.policy;
  using K = BlockTensor;
  if (policy.full(l)) {
    // The last block of a segment reruns the whole segment (rebuilding its outputs, and leaving its
    // own internals in the workspace); every other block reruns itself from the rebuilt input.
    const bool last_of_segment = l + 1 == policy.segment_end(l);
    const int first = last_of_segment ? policy.segment_start(l) : l;
    for (int j = first; j <= l; ++j) block_forward(j, B, T, ctx, flops_.recompute, j > first, j < l);
  }
  const bool selective = policy.selective(l);
  BlockViews v = block_views(l, B, T);
  Tensor in = block_input(l, B, T);
  Tensor dresidual = act(ModelTensor::DResidual, {B, T, C}), dbranch = act(ModelTensor::DBranch, {B, T, C});
  Tensor datty = act(ModelTensor::DAtty, {B, T, C});
  Tensor dqkv = act(ModelTensor::DQkv, {B, T, 3 * C}), dfch = act(ModelTensor::DFch, {B, T, 4 * C});

  if (selective && policy.gelu)
    produce(l, K::FchGelu, v[K::FchGelu], [&](const Tensor& out) { backend_.gelu_forward({out, v[K::Fch]}); });
  linear_backward(dfch, g.fcprojw, g.fcprojb, dbranch, v[K::FchGelu], p.fcprojw, l, Fp8Linear::FcProj);
  lora_backward(l, LoraTarget::FcProj, dfch, dbranch, v[K::FchGelu], ctx);
  backend_.gelu_backward({dfch, dfch, v[K::Fch]});
  if (selective && policy.layernorm) {
    produce(l, K::Ln2, v[K::Ln2], [&](const Tensor& out) {
      backend_.layernorm_forward({out, v[K::Ln2Mean], v[K::Ln2Rstd], v[K::Residual2], p.ln2w, p.ln2b});
    });
  }
  linear_backward(dbranch, g.fcw, g.fcb, dfch, v[K::Ln2], p.fcw, l, Fp8Linear::Fc);
  lora_backward(l, LoraTarget::Fc, dbranch, dfch, v[K::Ln2], ctx);
  backend_.layernorm_residual_backward(
      {{dresidual, g.ln2w, g.ln2b, dbranch, v[K::Residual2], p.ln2w, v[K::Ln2Mean], v[K::Ln2Rstd]},
       {dbranch, dresidual, dropout(ctx, ul, RngSite::AttentionResidual)}});
  linear_backward(datty, g.attprojw, g.attprojb, dbranch, v[K::Atty], p.attprojw, l, Fp8Linear::AttnProj);
  lora_backward(l, LoraTarget::AttnProj, datty, dbranch, v[K::Atty], ctx);
  if (selective && policy.attention && backend_.attention_keeps_probs()) {
    // Only the probabilities are rebuilt; the output, which atty already holds, goes to scratch. (A fused
    // attention keeps its log-sum-exp, which is all its backward needs.)
    backend_.attention_forward({act(ModelTensor::Branch, {B, T, C}), v[K::Probs], v[K::Qkv], config_.n_head,
                                dropout(ctx, ul, RngSite::AttentionProbs)});
    flops_.recompute += 4.0 * B * static_cast<double>(T) * T * C;
  }
  const Tensor dprobs = backend_.attention_keeps_probs() ? act(ModelTensor::DProbs, {B, config_.n_head, T, T})
                                                         : act(ModelTensor::DProbs, {B, config_.n_head, T});
  backend_.attention_backward({dqkv, dprobs, datty, v[K::Qkv], v[K::Probs], config_.n_head,
                               dropout(ctx, ul, RngSite::AttentionProbs), v[K::Atty]});
  flops_.backward += 8.0 * B * static_cast<double>(T) * T * C;
  if (selective && policy.layernorm) {
    produce(l, K::Ln1, v[K::Ln1], [&](const Tensor& out) {
      backend_.layernorm_forward({out, v[K::Ln1Mean], v[K::Ln1Rstd], in, p.ln1w, p.ln1b});
    });
  }
  linear_backward(dbranch, g.qkvw, g.qkvb, dqkv, v[K::Ln1], p.qkvw, l, Fp8Linear::Qkv);
  lora_backward(l, LoraTarget::Qkv, dbranch, dqkv, v[K::Ln1], ctx);
  const LayerNormBackwardArgs ln1{dresidual, g.ln1w, g.ln1b, dbranch, in, p.ln1w, v[K::Ln1Mean], v[K::Ln1Rstd]};
  if (l == 0) backend_.layernorm_backward(ln1);
  else backend_.layernorm_residual_backward({ln1, {dbranch, dresidual, dropout(ctx, ul - 1, RngSite::MlpResidual)}});
}

void GPT::backward(const StepContext& ctx, const std::function<void(int block)>& on_gradients_ready) {
  GPT_CHECK(last_has_dlogits_, "backward needs a preceding training forward (with targets and dloss > 0)");
  const int B = last_B_, T = last_T_;
  const int64_t C = config_.n_embd, Vp = config_.padded_vocab_size();
  const ModelParameters& p = compute_;
  const ModelParameters& g = grad_blocks_;
  Tensor dresidual = act(ModelTensor::DResidual, {B, T, C}), dbranch = act(ModelTensor::DBranch, {B, T, C});

  // LM head, tied to wte: logits = lnf wte^T.
  linear_backward(dbranch, g.wte, Tensor(), act(ModelTensor::Logits, {B, T, Vp}), act(ModelTensor::Lnf, {B, T, C}), p.wte);
  backend_.fill({dresidual, 0.0f});
  backend_.layernorm_residual_backward(
      {{dresidual, g.lnfw, g.lnfb, dbranch, block_views(config_.n_layer - 1, B, T)[BlockTensor::Out], p.lnfw,
        act(ModelTensor::LnfMean, {B, T}), act(ModelTensor::LnfRstd, {B, T})},
       {dbranch, dresidual, dropout(ctx, static_cast<uint32_t>(config_.n_layer - 1), RngSite::MlpResidual)}});
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    block_backward(l, B, T, ctx);
    if (on_gradients_ready) on_gradients_ready(l);
  }
  // Under LoRA the embeddings are frozen and nothing lies below them.
  if (!g.wte.empty())
    backend_.embedding_backward({g.wte, g.wpe, dresidual, act(ModelTensor::Tokens, {B, T}), dropout(ctx, 0, RngSite::Embedding)});
  if (on_gradients_ready) on_gradients_ready(-1);
}

void GPT::zero_grads() {
  backend_.fill({gradients_flat(), 0.0f});
  // The frozen LayerNorm parameters' sinks are never read; zeroing them keeps their sums from growing to Inf.
  if (lora_products_)
    for (const Tensor& sink : {lora_products_->frozen_weight_sink(), lora_products_->frozen_bias_sink()})
      backend_.fill({sink, 0.0f});
}

Tensor GPT::gradients_flat() {
  const size_t bytes = grads_arena_.layout().total_bytes();
  const DType dtype = precision_.gradient();
  return Tensor(grads_arena_.base(), {static_cast<int64_t>(bytes / dtype_size(dtype))}, dtype, backend_.device());
}

double GPT::gradient_norm_squared() {
  Tensor out = act(ModelTensor::SumSquares, {1});
  backend_.sum_of_squares({out, gradients_flat()});
  return host_sum(out);
}

}  // namespace gpt

#include "train/step_runner.h"

#include "core/error.h"
#include "optim/lr_schedule.h"
#include "train/nonfinite.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace gpt {

void resolve_accumulation(TrainConfig& tc, int ranks) {
  if (tc.global_batch_tokens <= 0) return;
  const int64_t per_micro_step = static_cast<int64_t>(tc.batch_size) * tc.seq_len * ranks;
  GPT_CHECK(tc.global_batch_tokens % per_micro_step == 0,
            "train.global_batch_tokens = {} is not a multiple of train.batch_size x train.seq_len x ranks = {} x {} x "
            "{} = {}; use a multiple of {} such as {}, or change the batch size",
            tc.global_batch_tokens, tc.batch_size, tc.seq_len, ranks, per_micro_step, per_micro_step,
            std::max<int64_t>(1, tc.global_batch_tokens / per_micro_step) * per_micro_step);
  const int derived = static_cast<int>(tc.global_batch_tokens / per_micro_step);
  if (tc.grad_accum_steps != 1 && tc.grad_accum_steps != derived)
    spdlog::warn("train.grad_accum_steps = {} is replaced by {}, derived from train.global_batch_tokens",
                 tc.grad_accum_steps, derived);
  tc.grad_accum_steps = derived;
}

StepRunner::StepRunner(const Config& config, GPT& model, DataParallel& dp, AdamW& optimizer, LossScaler* scaler)
    : config_(config), model_(model), dp_(dp), optimizer_(optimizer), scaler_(scaler),
      reduce_hook_([this](int block) { dp_.gradients_ready(block); }),
      offload_hook_([this](int block) { optimizer_.stage_gradients(block, model_.gradient_arena()); }) {}

StepResult StepRunner::run(int64_t step, std::span<const int32_t> inputs, std::span<const int32_t> targets) {
  const TrainConfig& t = config_.train;
  const size_t micro = static_cast<size_t>(t.batch_size) * t.seq_len;
  GPT_CHECK(inputs.size() == micro * t.grad_accum_steps && targets.size() == inputs.size(),
            "an optimizer step needs {} inputs and targets ({} micro-batches of {} x {}), got {} and {}",
            micro * t.grad_accum_steps, t.grad_accum_steps, t.batch_size, t.seq_len, inputs.size(), targets.size());
  const auto start = std::chrono::steady_clock::now();
  StepResult r;
  r.step = step + 1;
  // The step's loss is the mean over every counted target token of all K micro-batches of all ranks, so
  // each micro-batch's token losses are scaled by 1/N up front, N summed over the ranks before the first
  // backward; neither K nor the number of ranks enters the normalisation.
  double tokens = 0.0;
  for (int32_t target : targets) tokens += target != -1;
  dp_.all_reduce({&tokens, 1});
  r.target_tokens = static_cast<int64_t>(tokens);
  GPT_CHECK(r.target_tokens > 0, "step {}: every target of the batch is masked (-1)", step + 1);
  // fp16: the loss gradient is multiplied by the loss scale S, so every gradient of backward is S times
  // the true one; the norm is unscaled below and AdamW divides the gradients by S.
  const double loss_scale = scaler_ ? static_cast<double>(scaler_->scale()) : 1.0;
  const float dloss = static_cast<float>(loss_scale / static_cast<double>(r.target_tokens));

  model_.zero_grads();
  optimizer_.forget_staged_gradients();
  double loss_sum = 0.0;
  for (int k = 0; k < t.grad_accum_steps; ++k) {
    // Rank r's micro-batch k holds the samples that micro-batch k W + r would hold on one rank accumulating
    // K W micro-batches, and draws that micro-batch's dropout masks: the runs are the same, dropout included.
    const auto micro_step = static_cast<uint32_t>(k * dp_.world_size() + dp_.rank());
    StepContext ctx{t.seed, static_cast<uint32_t>(step), micro_step, true};
    model_.forward(inputs.subspan(k * micro, micro), targets.subspan(k * micro, micro), t.batch_size, t.seq_len, ctx,
                   dloss);
    loss_sum += model_.loss_sum();
    // Gradients are reduced once per step: bucket by bucket during the last micro-batch's backward. On one
    // rank an offloaded optimizer queues each block's gradient copy to the host there instead, on the copy
    // stream, so it lands during the rest of backward; over several ranks they are final only once reduced,
    // and the update queues their copies.
    const bool last = k + 1 == t.grad_accum_steps;
    if (last && config_.dist.overlap && dp_.world_size() > 1)
      model_.backward(ctx, reduce_hook_);
    else if (last && optimizer_.offloaded() && dp_.world_size() == 1)
      model_.backward(ctx, offload_hook_);
    else
      model_.backward(ctx);
  }
  dp_.all_reduce({&loss_sum, 1});
  r.loss = loss_sum / static_cast<double>(r.target_tokens);
  if (Fp8State* fp8 = model_.fp8()) {
    // Every rank takes the next step's scales from the same amaxes, the max over the ranks, so the ranks
    // cast alike and 2 ranks train as 1 rank accumulating.
    const std::span<float> amaxes = fp8->finish_step(r.fp8);
    dp_.all_reduce_max(amaxes);
    double counts[3] = {static_cast<double>(r.fp8.values), static_cast<double>(r.fp8.underflows),
                        static_cast<double>(r.fp8.saturated)};
    dp_.all_reduce(counts);
    r.fp8.values = static_cast<int64_t>(counts[0]);
    r.fp8.underflows = static_cast<int64_t>(counts[1]);
    r.fp8.saturated = static_cast<int64_t>(counts[2]);
    for (float a : amaxes)
      if (!(a <= r.fp8.amax_max)) r.fp8.amax_max = a;
    fp8->update_scales(amaxes);
  }
  r.grad_norm = std::sqrt(dp_.finish_gradients()) / loss_scale;
  const double clip = config_.optim.grad_clip;
  const double grad_scale = (clip > 0.0 && r.grad_norm > clip ? clip / r.grad_norm : 1.0) / loss_scale;
  r.lr = learning_rate(config_.optim, static_cast<int>(step), t.steps);
  if (scaler_) {
    r.loss_scale = loss_scale;
    // Inf/NaN gradients under a finite loss are the scaled backward overflowing FP16: skip the step and
    // back the scale off, as the scaler prescribes; a non-finite loss is a real divergence (below).
    r.overflow = std::isfinite(r.loss) && !std::isfinite(r.grad_norm);
    if (std::isfinite(r.loss)) scaler_->update(!r.overflow);
    r.overflow_steps = scaler_->state().skipped_steps;
  }
  if (r.overflow) {
    r.applied = false;
  } else if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    // Applying this update would turn the weights and AdamW's moments into NaN for good.
    r.nonfinite = describe_nonfinite_step(r.loss, r.grad_norm, model_);
    r.applied = false;
  } else {
    dp_.optimizer_step(optimizer_, r.lr, grad_scale);
    if (optimizer_.offloaded()) {
      r.host_optimizer_ms = optimizer_.last_host_ms();
      r.host_adamw_ms = optimizer_.last_adamw_ms();
    }
  }
  model_.backend().synchronize();
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace gpt

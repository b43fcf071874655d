// One optimizer step, as both the trainer and `gpt-train bench` run it, so that the bench times exactly
// what training does: K micro-batches of B x T, each micro-batch's token losses scaled by 1/N (N the
// counted target tokens of the whole step over every rank), forward and backward per micro-batch with the
// gradients accumulated in place, the reduction over the ranks (bucket by bucket during the last backward
// when dist.overlap), the FP8 scales of the next step, the loss scaler (fp16), global-norm clipping and
// AdamW. A non-finite or overflowed step is reported and not applied; what to do next is the caller's.
#pragma once

#include "config/config.h"
#include "dist/data_parallel.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "precision/fp8_state.h"
#include "precision/loss_scaler.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace gpt {

struct StepResult {
  int64_t step = 0;           // 1-based: optimizer steps completed after this one
  double loss = 0.0;          // mean over the step's target tokens
  double grad_norm = 0.0;     // before clipping
  double lr = 0.0;
  int64_t target_tokens = 0;  // tokens whose target counted
  double ms = 0.0;
  // memory.offload: optimizer: the part of ms the update spent on the host (waiting for the gradients'
  // copies, AdamW, queueing the weights' copies back), during which the device has no compute queued, and
  // the part of that AdamW itself took; 0 otherwise.
  double host_optimizer_ms = 0.0;
  double host_adamw_ms = 0.0;
  // Set when the loss or gradient norm was NaN/Inf: what went non-finite first (see nonfinite.h). With
  // train.on_nonfinite: skip the step counts but applied is false; with stop the step does not count either.
  std::string nonfinite;
  bool applied = true;  // whether the optimizer update was applied
  // precision.recipe fp16: the loss scale this step ran with (0 without loss scaling), whether its scaled
  // gradients overflowed (the update is skipped and the scale backed off), and the overflowed steps so far.
  double loss_scale = 0.0;
  bool overflow = false;
  int64_t overflow_steps = 0;
  // precision.recipe fp8: the step's casts over all ranks (scales used, largest amax, counts); zero otherwise.
  Fp8StepStats fp8;
};

// train.global_batch_tokens, when set, decides train.grad_accum_steps: the tokens of one micro-batch on
// every rank (B x T x ranks) must divide it. Throws naming a multiple that would; warns when it replaces a
// grad_accum_steps the config also set.
void resolve_accumulation(TrainConfig& train, int ranks);

class StepRunner {
 public:
  // config.train gives B, T, K, the seed and the schedule's length, config.optim the schedule and the
  // clipping, config.dist.overlap the reduction's timing. scaler: the fp16 loss scaler, null otherwise.
  // Every argument must outlive the runner.
  StepRunner(const Config& config, GPT& model, DataParallel& dp, AdamW& optimizer, LossScaler* scaler);

  // Optimizer step `step` (the steps completed before it, 0-based, which seeds dropout and sets the
  // learning rate) over the K micro-batches of inputs and targets (each K*B*T; targets may hold -1).
  // The result's step is step + 1.
  StepResult run(int64_t step, std::span<const int32_t> inputs, std::span<const int32_t> targets);

 private:
  const Config& config_;
  GPT& model_;
  DataParallel& dp_;
  AdamW& optimizer_;
  LossScaler* scaler_;
  std::function<void(int)> reduce_hook_;  // GPT::backward's hook in the last micro-batch of a step
  std::function<void(int)> offload_hook_;  // the same on one rank with an offloaded optimizer
};

}  // namespace gpt

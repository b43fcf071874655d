#include "bench/bench_session.h"

#include "memory/planner.h"
#include "memory/recompute.h"
#include "precision/recipe.h"
#include "train/offload.h"

#include <fmt/format.h>

namespace gpt::bench {

BenchData::BenchData(const Config& config, int batch, int seq_len) {
  DataLoaderOptions options;
  options.pattern = config.data.train;
  options.batch_size = batch;
  options.seq_len = seq_len;
  options.vocab_size = config.model.vocab_size;
  options.shuffle = true;
  options.seed = config.train.seed;
  try {
    loader_ = std::make_unique<DataLoader>(options);
    description_ = fmt::format("{} ({} shards, {} samples of {} tokens)", config.data.train,
                               loader_->shard_paths().size(), loader_->num_samples(), seq_len);
  } catch (const Error& e) {
    description_ = fmt::format("random tokens (uniform over the {} ids, seeded): the train data could not be read: {}",
                               config.model.vocab_size, e.what());
    rng_.emplace(config.train.seed, 0x62656e63u);
    vocab_ = static_cast<uint32_t>(config.model.vocab_size);
  }
}

void BenchData::next(std::span<int32_t> inputs, std::span<int32_t> targets) {
  if (loader_) {
    loader_->next_batch(inputs, targets);
    return;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = static_cast<int32_t>(rng_->next_u32() % vocab_);
    targets[i] = static_cast<int32_t>(rng_->next_u32() % vocab_);
  }
}

BenchSession::BenchSession(Config config) : config_(std::move(config)) {
  resolve_accumulation(config_.train, comm_.world_size());
  const TrainConfig& t = config_.train;
  backend_ = make_backend(parse_backend_kind(t.backend), {t.threads, config_.precision.tf32, parse_attention_kind(t.attention), -1,
                                                           config_.precision.cpu_narrow_matmul == "exact"});
  profiler_ = std::make_unique<ProfilingBackend>(*backend_);
  // The recipe's work is timed too (fp16 with its loss scaler, fp8 with its scaling state).
  const PrecisionRecipe recipe = precision_recipe(config_.precision);
  recipe.validate(config_.model.n_layer);
  recipe.check_fp8_products(backend_->capabilities(), config_.model.n_embd, config_.model.n_layer,
                            "precision.recipe: bf16");
  Backend* masters_host = masters_on_host(config_) ? &offload_host(*profiler_, t.threads, host_backend_) : nullptr;
  model_ = std::make_unique<GPT>(config_.model, t.batch_size, t.seq_len, *profiler_, DType::F32,
                                 resolve_recompute(config_.recompute, config_.model.n_layer), recipe,
                                 LoraSpec::from_config(config_.finetune), masters_host);
  model_->init_weights(t.seed);
  dp_ = std::make_unique<DataParallel>(*model_, comm_, config_.dist.zero);
  optimizer_ = make_optimizer(config_, *model_, *dp_, *profiler_, t.threads, host_backend_);
  if (recipe.uses_loss_scaling()) scaler_.emplace(recipe.loss_scale);
  runner_ = std::make_unique<StepRunner>(config_, *model_, *dp_, *optimizer_, scaler_ ? &*scaler_ : nullptr);
  data_ = std::make_unique<BenchData>(config_, t.batch_size, t.seq_len);
  inputs_.resize(static_cast<size_t>(t.grad_accum_steps) * t.batch_size * t.seq_len);
  targets_.resize(inputs_.size());
}

StepResult BenchSession::step() {
  const size_t micro = static_cast<size_t>(config_.train.batch_size) * config_.train.seq_len;
  for (int k = 0; k < config_.train.grad_accum_steps; ++k)
    data_->next(std::span(inputs_).subspan(k * micro, micro), std::span(targets_).subspan(k * micro, micro));
  const StepResult r = runner_->run(step_, inputs_, targets_);
  ++step_;
  return r;
}

}  // namespace gpt::bench

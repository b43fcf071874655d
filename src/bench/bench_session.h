// What `gpt-train bench` times: the configured model, optimizer and data (the train shards, or seeded random
// tokens when there are none) on a ProfilingBackend around the configured backend, stepped by the trainer's
// own StepRunner on one rank, loss scaler included. A bench step is therefore a training step: the same
// batches (the loader is the trainer's, with the same seed), the same normalisation and reduction, the same
// update, bit for bit. The data of a step is fetched before its clock starts, as in the trainer.
#pragma once

#include "backend/profiling_backend.h"
#include "config/config.h"
#include "core/random.h"
#include "data/loader.h"
#include "dist/data_parallel.h"
#include "dist/single_communicator.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "precision/loss_scaler.h"
#include "train/step_runner.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpt::bench {

// Micro-batches from the train shards, or seeded random tokens when there are none.
class BenchData {
 public:
  BenchData(const Config& config, int batch, int seq_len);
  const std::string& description() const { return description_; }
  void next(std::span<int32_t> inputs, std::span<int32_t> targets);

 private:
  std::unique_ptr<DataLoader> loader_;
  std::optional<HostRng> rng_;
  uint32_t vocab_ = 1;
  std::string description_;
};

class BenchSession {
 public:
  // config as loaded; train.global_batch_tokens is resolved into grad_accum_steps here, and memory.budget is
  // not applied (the bench measures the configuration as written).
  explicit BenchSession(Config config);

  // Fetches the next step's K micro-batches (untimed), then runs one optimizer step.
  StepResult step();

  const Config& config() const { return config_; }
  const RecomputePolicy& policy() const { return model_->activation_plan().policy; }
  Backend& backend() { return *backend_; }
  ProfilingBackend& profiler() { return *profiler_; }
  GPT& model() { return *model_; }
  const std::string& data_description() const { return data_->description(); }
  int64_t tokens_per_step() const { return static_cast<int64_t>(inputs_.size()); }

 private:
  Config config_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ProfilingBackend> profiler_;
  // memory.offload on a GPU: the host side of the optimizer, and the memory of the model's masters when they
  // are on the host, so it outlives the model.
  std::unique_ptr<Backend> host_backend_;
  std::unique_ptr<GPT> model_;
  SingleCommunicator comm_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<AdamW> optimizer_;
  std::optional<LossScaler> scaler_;
  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<BenchData> data_;
  std::vector<int32_t> inputs_, targets_;
  int64_t step_ = 0;
};

}  // namespace gpt::bench

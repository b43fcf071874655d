// The training loop: K micro-batches of B x T per optimizer step, the loss normalised by the target
// tokens of the whole step, global-norm clipping, AdamW, periodic validation, samples and checkpoints.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "train/metrics.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpt {

struct StepResult {
  int64_t step = 0;           // 1-based: optimizer steps completed after this one
  double loss = 0.0;          // mean over the step's target tokens
  double grad_norm = 0.0;     // before clipping
  double lr = 0.0;
  int64_t target_tokens = 0;  // tokens whose target counted
  double ms = 0.0;
};

struct TrainSummary {
  int64_t steps_done = 0;
  double last_loss = 0.0;
  std::optional<double> last_val_loss;
  std::string last_sample;
  std::string last_checkpoint;
};

class Trainer {
 public:
  // config_yaml is the resolved configuration, saved in the run directory and with each checkpoint.
  Trainer(const Config& config, std::string config_yaml);
  ~Trainer();

  TrainSummary run();
  // One optimizer step over the given K micro-batches (inputs/targets each K*B*T, targets may hold -1).
  StepResult train_step(std::span<const int32_t> inputs, std::span<const int32_t> targets);
  double evaluate();
  std::string sample();

  GPT& model() { return *model_; }
  AdamW& optimizer() { return *optimizer_; }
  int64_t step() const { return step_; }

 private:
  void log_start() const;
  std::string write_checkpoint();

  Config config_;
  std::string config_yaml_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<GPT> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<DataLoader> train_loader_, val_loader_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::vector<int32_t> inputs_, targets_;  // K*B*T host staging, allocated once
  int64_t step_ = 0;
};

}  // namespace gpt

// The training loop: K micro-batches of B x T per optimizer step, the loss normalised by the target
// tokens of the whole step, global-norm clipping, AdamW, periodic validation, samples and checkpoints.
#pragma once

#include "backend/backend.h"
#include "config/config.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "dist/communicator.h"
#include "dist/data_parallel.h"
#include "io/checkpoint.h"
#include "io/lora_adapters.h"
#include "memory/ledger.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "precision/recipe.h"
#include "train/contention.h"
#include "train/metrics.h"
#include "train/run_directory.h"
#include "train/step_eta.h"
#include "train/step_runner.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpt {

enum class TrainStatus {
  Completed,    // reached train.steps
  Interrupted,  // a stop request (SIGINT/SIGTERM) ended it after a step, with a checkpoint
  NonFinite,    // train.on_nonfinite: stop; the checkpoint holds the last good state
};

struct TrainSummary {
  int64_t steps_done = 0;
  double last_loss = 0.0;
  std::optional<double> last_val_loss;
  std::string last_sample;
  std::string last_checkpoint;
  TrainStatus status = TrainStatus::Completed;
  std::string message;        // why the run ended early, for the user
  int64_t skipped_steps = 0;  // updates not applied over the whole run, resumes included (non-finite, fp16 overflow)
  uint64_t measured_activation_bytes = 0;  // written in the first step of this process
};

class Trainer {
 public:
  // config_yaml is the resolved configuration, saved in the run directory and with each checkpoint.
  // comm: the ranks of a data-parallel run (it must outlive the trainer); null trains in this process alone.
  Trainer(const Config& config, std::string config_yaml, Communicator* comm = nullptr);
  ~Trainer();

  TrainSummary run();
  // One optimizer step over the given K micro-batches (inputs/targets each K*B*T, targets may hold -1).
  StepResult train_step(std::span<const int32_t> inputs, std::span<const int32_t> targets);
  double evaluate();
  std::string sample();

  GPT& model() { return *model_; }
  AdamW& optimizer() { return *optimizer_; }
  DataParallel& data_parallel() { return *dp_; }
  const Config& config() const { return config_; }  // as resolved (accumulation steps derived)
  int64_t step() const { return step_; }
  // The ledger of this rank (ledger.txt, the start-up log): the config's, with the data-parallel buffers and
  // this rank's optimizer state.
  MemoryLedger rank_ledger() const;

 private:
  // The constructor's three steps. plan settles the configuration: the accumulation steps, the backend, and
  // what memory.budget chooses (precision, micro-batch, recompute policy, which it returns), checking the
  // ledger against the host's memory. build allocates the model, data parallelism, the optimizer and the
  // data, and initialises the weights. resume (train.resume) restores the newest good checkpoint.
  RecomputePolicy plan();
  void build(const RecomputePolicy& policy);
  void resume();
  void log_start() const;
  // Under several ranks, plan's check that every rank took the same kind of backend: else every rank stops,
  // saying which took what.
  void require_one_backend_kind();
  // Refuses to resume LoRA adapters onto a base other than the one they were trained on.
  void check_lora_base(const CheckpointState& state, const std::string& dir) const;
  // The loader position defaults to the current one; a stop on a non-finite step saves the position
  // before that step's batches.
  std::string write_checkpoint(std::optional<LoaderPosition> loader = std::nullopt);
  // The steps of run(); `good` as fail_keeping_last_good_state() takes it.
  void train_loop(TrainSummary& summary, int64_t first_step, double& total_ms, std::optional<LoaderPosition>& good);
  // Rethrows an error that ended the loop, first writing a checkpoint of the last good state (the model as
  // it is, with loader position `good`) when there is one this process can write; the error says where.
  [[noreturn]] void fail_keeping_last_good_state(const std::exception& error, std::optional<LoaderPosition> good,
                                                 int64_t first_step);
  // Whether a stop was requested on any rank (a collective: every rank asks at the same points).
  bool stop_everywhere();

  std::unique_ptr<RunDirectoryLock> run_lock_;  // rank 0; declared first so it is released last
  Config config_;
  std::string config_yaml_;
  std::unique_ptr<Communicator> own_comm_;
  Communicator* comm_ = nullptr;
  std::unique_ptr<Backend> backend_;
  BackendCapabilities backend_planned_;  // as the backend reported them when the memory was planned
  // memory.offload where the device is not the host: AdamW's backend, and the memory of the model's masters
  // when they are on the host, so it outlives the model.
  std::unique_ptr<Backend> host_backend_;
  std::unique_ptr<GPT> model_;
  std::unique_ptr<DataParallel> dp_;
  // The backend's own communicator (NCCL). Destroyed before the buffers its collectives use (dp_'s, the
  // model's) and before the backend: it drains or aborts its collectives first.
  std::unique_ptr<Communicator> device_comm_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<StepRunner> step_runner_;
  std::unique_ptr<DataLoader> train_loader_, val_loader_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<MetricsWriter> metrics_;
  PrecisionRecipe recipe_;
  LoraBase lora_base_;  // LoRA: the frozen base's identity, saved with each checkpoint
  std::optional<LossScaler> scaler_;  // fp16 only
  std::vector<int32_t> inputs_, targets_;  // K*B*T host staging, allocated once
  int64_t step_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t checkpointed_step_ = -1;  // step of the newest checkpoint this process wrote or resumed from
  bool stop_ = false;               // the last answer of stop_everywhere()
  std::unique_ptr<ContentionMonitor> contention_;
  StepEta eta_{50};  // from the last 50 step times
};

}  // namespace gpt

#include "train/trainer.h"

#include "model/kv_cache_decoder.h"

#include "dist/single_communicator.h"
#include "config/config_loader.h"
#include "core/printable.h"
#include "core/progress.h"
#include "core/process_memory.h"
#include "io/checkpoint.h"
#include "io/durable_file.h"
#include "io/hf_gpt2.h"
#include "io/llmc_model_file.h"
#include "io/lora_adapters.h"
#include "io/optimizer_shards.h"
#include "memory/arena_usage.h"
#include "memory/levers.h"
#include "memory/planner.h"
#include "report/run_report.h"
#include "train/data_check.h"
#include "train/memory_check.h"
#include "train/offload.h"
#include "train/precision_state.h"
#include "train/resume.h"
#include "train/run_directory.h"
#include "train/sampler.h"
#include "train/stop_request.h"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

namespace fs = std::filesystem;

namespace gpt {
namespace {

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::map<std::string, uint64_t> loader_fields(const LoaderPosition& p) {
  return {{"epoch", p.epoch}, {"shard_cursor", p.shard_cursor}, {"sample_cursor", p.sample_cursor}};
}

LoaderPosition loader_position(const std::map<std::string, uint64_t>& fields, const std::string& where) {
  LoaderPosition p;
  for (const auto& [key, member] : {std::pair{"epoch", &LoaderPosition::epoch},
                                    std::pair{"shard_cursor", &LoaderPosition::shard_cursor},
                                    std::pair{"sample_cursor", &LoaderPosition::sample_cursor}}) {
    auto it = fields.find(key);
    GPT_CHECK(it != fields.end(), "{}: the loader position has no '{}'", where, key);
    p.*member = it->second;
  }
  return p;
}

// The step of a checkpoint directory, named step_NNNNNNNN.
int64_t step_of_checkpoint(const std::string& dir) {
  const std::string name = fs::path(dir).filename().string();
  GPT_CHECK(name.rfind("step_", 0) == 0 && name.size() > 5, "'{}' is not a checkpoint directory (step_N)", dir);
  return std::stoll(name.substr(5));
}

// train.threads 0 means all cores. Several ranks on one node share them: each gets the cores it may run
// on (mpirun binds each rank to its own) but at most its share of the node. OMP_NUM_THREADS, when set, wins.
int threads_per_rank(int threads, int local_size) {
  if (threads > 0 || local_size <= 1 || std::getenv("OMP_NUM_THREADS") != nullptr) return threads;
  const int node_cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, std::min(omp_get_num_procs(), node_cores / local_size));
}

}  // namespace

Trainer::Trainer(const Config& config, std::string config_yaml, Communicator* comm)
    : config_(config), config_yaml_(std::move(config_yaml)), comm_(comm) {
  if (comm_ == nullptr) {
    own_comm_ = std::make_unique<SingleCommunicator>();
    comm_ = own_comm_.get();
  }
  // Before anything is allocated: the run directory is this run's, or the run does not start.
  std::optional<ExistingRun> old_run;  // set aside once every other start check has passed
  if (comm_->rank() == 0) {
    run_lock_ = std::make_unique<RunDirectoryLock>(config_.log.run_dir);
    old_run = check_run_directory(config_.log.run_dir, config_.train.resume, config_.train.overwrite);
  }
  const RecomputePolicy policy = plan();
  build(policy);
  if (config_.train.resume) resume();
  if (comm_->rank() == 0) {
    if (old_run) set_run_aside(config_.log.run_dir, *old_run);
    write_file_durably((fs::path(config_.log.run_dir) / "config.yaml").string(), config_yaml_);
    metrics_ = std::make_unique<MetricsWriter>((fs::path(config_.log.run_dir) / "metrics.jsonl").string());
  }
}

void Trainer::require_one_backend_kind() {
  // train.backend auto decides per rank: a node without a usable GPU takes the CPU while the others take
  // CUDA, and the two would then wait in collectives of different communicators. Every rank learns where
  // each trains (over the host communicator, whose buffers are host memory) and stops alike.
  std::vector<int32_t> on_cuda(static_cast<size_t>(comm_->world_size()), 0);
  on_cuda[static_cast<size_t>(comm_->rank())] = backend_->device() == Device::CUDA;
  comm_->all_reduce_sum(Tensor(on_cuda.data(), {static_cast<int64_t>(on_cuda.size())}, DType::I32));
  std::string cuda_ranks, cpu_ranks;
  for (size_t r = 0; r < on_cuda.size(); ++r) {
    std::string& ranks = on_cuda[r] ? cuda_ranks : cpu_ranks;
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  }
  GPT_CHECK(cuda_ranks.empty() || cpu_ranks.empty(),
            "train.backend {} took CUDA on rank(s) {} and the CPU on rank(s) {} (each rank's log says why); every "
            "rank must train on the same backend: give each rank a GPU the CUDA backend runs on, or set "
            "train.backend: cpu",
            config_.train.backend, cuda_ranks, cpu_ranks);
}

RecomputePolicy Trainer::plan() {
  resolve_accumulation(config_.train, comm_->world_size());
  const TrainConfig& t = config_.train;
  const bool distributed = comm_->world_size() > 1;
  backend_ = make_backend(parse_backend_kind(t.backend), {threads_per_rank(t.threads, comm_->local_size()),
                                                          config_.precision.tf32, parse_attention_kind(t.attention),
                                                          distributed ? comm_->local_rank() : -1,
                                                          config_.precision.cpu_narrow_matmul == "exact"});
  // A backend whose buffers the job's host communicator cannot reach brings its own (NCCL for CUDA),
  // bootstrapped over the host one; from here on every collective of the run goes through it.
  if (distributed) {
    require_one_backend_kind();
    if ((device_comm_ = backend_->make_communicator(*comm_))) {
      device_comm_->set_timeout(config_.dist.timeout_s);
      comm_ = device_comm_.get();
    }
  }
  contention_ = std::make_unique<ContentionMonitor>(omp_get_max_threads());
  backend_planned_ = backend_->capabilities();
  const BackendCapabilities& backend = backend_planned_;
  RecomputePolicy policy = resolve_recompute(config_.recompute, config_.model.n_layer);
  if (const std::optional<uint64_t> budget =
          resolve_memory_budget(config_.memory.budget, *backend_, "memory.budget", comm_->local_size())) {
    const MemoryChoice choice = choose_memory_plan(config_, *budget, backend);
    spdlog::info("{}", choice.reason);
    config_.precision.recipe = choice.recipe;
    config_.train.batch_size = choice.batch_size;
    config_.train.grad_accum_steps = choice.grad_accum_steps;
    config_.recompute = recompute_config(choice.policy, config_.model.n_layer);
    config_.memory.offload = choice.offload;
    policy = choice.policy;
    config_yaml_ = config_to_yaml(config_);
  }
  recipe_ = precision_recipe(config_.precision);
  recipe_.validate(config_.model.n_layer);
  recipe_.check_fp8_products(backend, config_.model.n_embd, config_.model.n_layer, "precision.recipe: bf16");
  // A rank's plan: under ZeRO-1 it holds only its shard of the optimizer state.
  const auto ledger_of_rank = [&](int rank) {
    return comm_->world_size() > 1
               ? data_parallel_ledger(config_, policy, t.batch_size, backend, comm_->world_size(), rank)
               : ledger_for(config_, policy, t.batch_size, backend);
  };
  if (const auto host = host_memory()) {
    // Every rank on this node takes its memory from this host.
    std::vector<MemoryLedger> node;
    for (const int rank : comm_->node_ranks()) node.push_back(ledger_of_rank(rank));
    check_fits_host_memory(node, *host, backend.device_memory_is_host);
  }
  if (const std::optional<DeviceMemoryUse> device = backend_->device_memory())
    check_fits_device_memory(ledger_of_rank(comm_->rank()), *device);
  return policy;
}

void Trainer::build(const RecomputePolicy& policy) {
  const TrainConfig& t = config_.train;
  const int rank = comm_->rank(), world = comm_->world_size();
  const int threads = threads_per_rank(t.threads, comm_->local_size());
  Backend* masters_host = masters_on_host(config_) ? &offload_host(*backend_, threads, host_backend_) : nullptr;
  model_ = std::make_unique<GPT>(config_.model, t.batch_size, t.seq_len, *backend_, DType::F32, policy, recipe_,
                                 LoraSpec::from_config(config_.finetune), masters_host);
  if (recipe_.uses_loss_scaling()) scaler_.emplace(recipe_.loss_scale);
  dp_ = std::make_unique<DataParallel>(*model_, *comm_, config_.dist.zero,
                                       config_.dist.reduce_dtype == "bf16" ? DType::BF16 : DType::F32);
  if (world > 1) {
    // Where every rank runs, gathered to rank 0 for the log: local rank, ranks on its node, threads.
    std::vector<double> where(3 * static_cast<size_t>(world), 0.0);
    where[3 * rank] = comm_->local_rank();
    where[3 * rank + 1] = comm_->local_size();
    where[3 * rank + 2] = omp_get_max_threads();
    dp_->all_reduce(where);
    int nodes = 0;
    for (int r = 0; r < world; ++r) nodes += where[3 * r] == 0;
    spdlog::info("data parallel over {}: {} ranks on {} node(s), ZeRO stage {}; gradients summed in {}, each rank "
                 "sends {:.1f} MiB a step (ring collectives)",
                 comm_->name(), world, nodes, dp_->zero_stage(), dtype_name(dp_->bucket(0).dtype),
                 dp_->bytes_sent_per_step() / (1 << 20));
    for (int r = 0; r < world; ++r)
      spdlog::info("  rank {}: local rank {} of {}, {} threads", r, where[3 * r], where[3 * r + 1], where[3 * r + 2]);
  }
  optimizer_ = make_optimizer(config_, *model_, *dp_, *backend_, threads, host_backend_);
  step_runner_ = std::make_unique<StepRunner>(config_, *model_, *dp_, *optimizer_, scaler_ ? &*scaler_ : nullptr);
  tokenizer_ = make_tokenizer(config_.data.tokenizer, config_.data.tokenizer_path);

  require_shards("data.train", config_.data.train);
  if (!config_.data.val.empty()) require_shards("data.val", config_.data.val);
  // Each rank reads its own part of every global batch (and of the validation batches).
  DataLoaderOptions train_opts{config_.data.train, t.batch_size, t.seq_len, config_.model.vocab_size, true, t.seed,
                               rank, world};
  train_loader_ = std::make_unique<DataLoader>(train_opts);
  if (!config_.data.val.empty()) {
    DataLoaderOptions val_opts{config_.data.val, t.batch_size, t.seq_len, config_.model.vocab_size, false, t.seed,
                               rank, world, "data.val"};
    val_loader_ = std::make_unique<DataLoader>(val_opts);
  }
  if (rank == 0) {
    std::vector<std::string> shards = train_loader_->shard_paths();
    if (val_loader_) shards.insert(shards.end(), val_loader_->shard_paths().begin(), val_loader_->shard_paths().end());
    check_shard_tokens(shards, config_.model.vocab_size, kStartTokenCheckBytes);
  }
  inputs_.resize(static_cast<size_t>(t.grad_accum_steps) * t.batch_size * t.seq_len);
  targets_.resize(inputs_.size());

  const bool lora = model_->lora().enabled();
  if (!config_.model.init_from.empty()) {
    const bool hf = is_hf_checkpoint(config_.model.init_from);
    const std::vector<float> params = hf ? load_hf_gpt2(config_.model.init_from, config_.model)
                                         : read_llmc_parameters(config_.model.init_from, llmc_header_of(config_.model));
    model_->base_from_host(params);
    if (lora) {
      model_->init_adapters(t.seed);
      lora_base_ = lora_base_identity(config_.model.init_from, params);
    }
    spdlog::info("initialised {} parameters from {} checkpoint '{}'{}", params.size(), hf ? "Hugging Face" : "llm.c",
                 config_.model.init_from, lora ? fmt::format(", frozen; LoRA adapters: {} parameters", model_->num_parameters()) : "");
  } else {
    model_->init_weights(t.seed);
    if (lora) lora_base_ = lora_base_identity(fmt::format("train.seed {}", t.seed), model_->base_to_host());
  }
  dp_->broadcast_parameters();  // every rank starts from rank 0's weights
}

void Trainer::resume() {
  // Rank 0 picks the checkpoint (verifying it, and setting damaged ones aside); every rank resumes from that
  // one, which it must see: log.run_dir has to be on a filesystem all nodes share.
  const int rank = comm_->rank();
  std::optional<std::string> dir;
  if (rank == 0) dir = select_resume_checkpoint(config_.log.run_dir, config_.checkpoint.on_corrupt);
  double picked = dir ? static_cast<double>(step_of_checkpoint(*dir)) + 1.0 : 0.0;  // 0: none
  dp_->all_reduce({&picked, 1});
  if (rank != 0 && picked > 0) {
    dir = checkpoint_dir(config_.log.run_dir, static_cast<int64_t>(picked) - 1);
    GPT_CHECK(fs::exists(fs::path(*dir) / kManifestFile),
              "rank {} cannot see '{}', the checkpoint rank 0 resumes from: log.run_dir must be on a filesystem "
              "every node shares",
              rank, *dir);
  }
  if (dir) {
    const std::string config_path = (fs::path(*dir) / "config.yaml").string();
    for (const std::string& change : check_resume_config(read_file_bytes(config_path), config_yaml_, config_path))
      spdlog::info("changed since the checkpoint: {}", change);
    CheckpointState state = load_checkpoint(*dir, *model_, *optimizer_, /*verify=*/false);  // rank 0 just did
    if (model_->lora().enabled()) check_lora_base(state, *dir);
    restore_precision_state(state, *dir, scaler_ ? &*scaler_ : nullptr, model_->fp8());
    train_loader_->restore(loader_position(state.loader, *dir));
    step_ = state.step;
    skipped_steps_ = state.skipped_steps;
    checkpointed_step_ = step_;
    if (rank == 0) truncate_metrics_after((fs::path(config_.log.run_dir) / "metrics.jsonl").string(), step_);
    spdlog::info("resumed from '{}' at step {}", *dir, step_);
  } else {
    spdlog::info("train.resume is set but '{}' has no checkpoint yet; starting fresh", config_.log.run_dir);
    // A run killed before its first checkpoint left records of steps that are now trained again.
    if (rank == 0) truncate_metrics_after((fs::path(config_.log.run_dir) / "metrics.jsonl").string(), 0);
  }
}

void Trainer::check_lora_base(const CheckpointState& state, const std::string& dir) const {
  const auto path = state.values.find(kLoraBasePathKey), crc = state.values.find(kLoraBaseCrcKey);
  GPT_CHECK(path != state.values.end() && crc != state.values.end(),
            "'{}' holds LoRA adapters but not the identity of their base ({} and {} in state.yaml)", dir,
            kLoraBasePathKey, kLoraBaseCrcKey);
  const std::string ours = fmt::format("{:08x}", lora_base_.crc32c);
  GPT_CHECK(crc->second == ours,
            "'{}' holds LoRA adapters trained on the base '{}' (CRC-32C {}), but this run's base is '{}' (CRC-32C {}): "
            "adapters only make sense on their own base; set model.init_from to the base they were trained on, or "
            "start a fresh run (train.resume: false)",
            dir, path->second, crc->second, lora_base_.path, ours);
  if (path->second != lora_base_.path)
    spdlog::info("the LoRA base moved from '{}' to '{}' (same CRC-32C {})", path->second, lora_base_.path, ours);
}

Trainer::~Trainer() = default;

void Trainer::log_start() const {
  // A few lines on the console; everything else at log.level: debug, and in the run directory
  // (config.yaml, ledger.txt).
  const TrainConfig& t = config_.train;
  spdlog::debug("resolved configuration:\n{}", config_yaml_);
  const int world = comm_->world_size();
  const MemoryLedger ledger = rank_ledger();
  if (world > 1 && dp_->zero_stage() == 1)
    spdlog::info("ZeRO-1: this rank keeps AdamW state for {} of {} parameters: {} instead of {}{}",
                 optimizer_->num_elements(), model_->num_parameters(), format_bytes(optimizer_->state_bytes()),
                 format_bytes(2 * ledger.parameters), optimizer_->offloaded() ? ", in host memory" : "");
  if (optimizer_->offloaded())
    spdlog::info("memory.offload: optimizer: {} in host memory (FP32 masters {}{}, gradients' copy {}, AdamW {}); "
                 "AdamW runs on the host",
                 format_bytes(ledger.host_total()), format_bytes(ledger.host_parameters),
                 ledger.host_compute_weights > 0 ? ", compute copy " + format_bytes(ledger.host_compute_weights) : "",
                 format_bytes(ledger.host_gradients), format_bytes(ledger.host_optimizer));
  const std::string ledger_text =
      fmt::format("memory ledger (recompute {}, precision {}), planned before allocation:\n{}",
                  model_->activation_plan().policy.describe(), config_.precision.recipe, ledger.table());
  spdlog::debug("{}", ledger_text);
  if (comm_->rank() == 0) write_file_durably((fs::path(config_.log.run_dir) / "ledger.txt").string(), ledger_text + "\n");
  if (model_->lora().enabled())
    spdlog::info("LoRA: rank {}, alpha {}, dropout {}, targets {}: {} trained parameters ({:.2f}% of the frozen base)",
                 config_.finetune.lora_rank, config_.finetune.lora_alpha, config_.finetune.lora_dropout,
                 fmt::join(config_.finetune.lora_targets, ", "), model_->num_parameters(),
                 100.0 * static_cast<double>(model_->num_parameters()) / static_cast<double>(model_->num_base_parameters()));
  spdlog::info("model: {:.2f}M parameters (L{} C{} NH{}, vocab {} padded to {}), backend {}, {} threads",
               static_cast<double>(model_->num_base_parameters()) / 1e6, config_.model.n_layer, config_.model.n_embd,
               config_.model.n_head, config_.model.vocab_size, config_.model.padded_vocab_size(), backend_->name(),
               omp_get_max_threads());
  spdlog::info("data: {} train shard(s), {} samples of {} tokens per epoch{}", train_loader_->shard_paths().size(),
               train_loader_->num_samples(), t.seq_len,
               val_loader_ ? fmt::format("; {} validation shard(s)", val_loader_->shard_paths().size()) : "");
  spdlog::info("batch: {} micro-batches x {} ranks x {} sequences x {} tokens = {} tokens per step; {} steps",
               t.grad_accum_steps, world, t.batch_size, t.seq_len,
               static_cast<int64_t>(t.grad_accum_steps) * world * t.batch_size * t.seq_len, t.steps);
  spdlog::info("memory: {} (parameters {}, gradients {}, AdamW {}, activations {}{}); precision {}, recompute {}",
               format_bytes(ledger.total()), format_bytes(ledger.weights()),
               format_bytes(ledger.gradients), format_bytes(ledger.optimizer), format_bytes(ledger.activations()),
               ledger.backend_workspace > 0 ? ", backend workspace " + format_bytes(ledger.backend_workspace) : "",
               config_.precision.recipe, model_->activation_plan().policy.describe());
  spdlog::info("run directory: {} (config.yaml, ledger.txt, metrics.jsonl, checkpoints/)", config_.log.run_dir);
}

MemoryLedger Trainer::rank_ledger() const {
  MemoryLedger ledger =
      ledger_for(config_, model_->activation_plan().policy, config_.train.batch_size, backend_planned_);
  if (comm_->world_size() > 1) {
    // This rank's optimizer state (a ZeRO-1 shard) and the data-parallel buffers, which the config alone does not give.
    ledger.communication = dp_->buffer_bytes();
    if (optimizer_->offloaded()) {
      ledger.host_optimizer = optimizer_->state_bytes();
      // With the masters in the model's parameter arena on the host, ledger_for's: every rank holds them all.
      if (!optimizer_->masters_in_parameters()) ledger.host_parameters = optimizer_->host_master_bytes();
      ledger.host_gradients = optimizer_->host_gradient_bytes();
    } else {
      ledger.optimizer = optimizer_->state_bytes();
    }
  }
  return ledger;
}

StepResult Trainer::train_step(std::span<const int32_t> inputs, std::span<const int32_t> targets) {
  const StepResult r = step_runner_->run(step_, inputs, targets);
  // A step that stops the run on a non-finite value does not count: the weights, moments and step stay those
  // of the last good step. Any other step not applied counts as skipped (AdamW did not count it; the
  // checkpoint's step check needs to know).
  if (!r.nonfinite.empty() && config_.train.on_nonfinite == "stop") return r;
  if (!r.applied) ++skipped_steps_;
  ++step_;
  return r;
}

double Trainer::evaluate() {
  GPT_CHECK(val_loader_ != nullptr, "no validation data (data.val is empty)");
  const TrainConfig& t = config_.train;
  const uint64_t batches = std::min<uint64_t>(t.eval_batches, val_loader_->batches_per_epoch());
  const size_t micro = static_cast<size_t>(t.batch_size) * t.seq_len;
  std::span<int32_t> in(inputs_.data(), micro), tg(targets_.data(), micro);
  val_loader_->reset();
  double loss_sum = 0.0;
  int64_t counted = 0;
  StepContext ctx{t.seed, static_cast<uint32_t>(step_), 0, false};
  // A long evaluation shows its rate and time left on a terminal; its result is the caller's "val loss" line.
  std::optional<Progress> progress;
  if (comm_->rank() == 0) progress.emplace("evaluation", ProgressUnit::Tokens, batches * micro);
  for (uint64_t b = 0; b < batches; ++b) {
    val_loader_->next_batch(in, tg);
    model_->forward(in, tg, t.batch_size, t.seq_len, ctx);
    loss_sum += model_->loss_sum();
    for (int32_t target : tg) counted += target != -1;
    if (progress) progress->update((b + 1) * micro);
  }
  if (progress) progress->clear();
  double sums[2] = {loss_sum, static_cast<double>(counted)};
  dp_->all_reduce(sums);
  GPT_CHECK(sums[1] > 0, "the validation data holds no target tokens");
  return sums[0] / sums[1];
}

std::string Trainer::sample() {
  const TrainConfig& t = config_.train;
  std::vector<int> prompt = tokenizer_->encode(t.sample_prompt);
  if (prompt.empty()) prompt.push_back(tokenizer_->eot_token());
  for (int token : prompt)
    GPT_CHECK(token < config_.model.vocab_size, "train.sample_prompt encodes to token {}, outside model.vocab_size {}",
              token, config_.model.vocab_size);
  HostRng rng(t.seed, 0x5a4d0000u + static_cast<uint32_t>(step_));
  SampleOptions options{t.sample_tokens, t.sample_temperature, t.sample_top_k};
  // The KV cache decodes in the run's recipe where the backend's products allow it (every recipe on the CPU).
  std::vector<int> tokens = KvCacheDecoder::supports(*model_) ? generate_cached(*model_, prompt, options, rng)
                                                              : generate(*model_, prompt, options, rng);
  // A model with a larger vocabulary than the tokenizer may emit ids the tokenizer cannot decode.
  for (int& token : tokens)
    if (token >= tokenizer_->vocab_size()) token = tokenizer_->eot_token();
  return t.sample_prompt + tokenizer_->decode(tokens);
}

bool Trainer::stop_everywhere() {
  // A signal reaches each process at a slightly different moment; summing the flags makes every rank stop
  // after the same step.
  double flag = stop_requested() ? 1.0 : 0.0;
  dp_->all_reduce({&flag, 1});
  stop_ = flag > 0;
  return stop_;
}

std::string Trainer::write_checkpoint(std::optional<LoaderPosition> loader) {
  CheckpointState state;
  state.step = step_;
  state.seed = config_.train.seed;
  state.skipped_steps = skipped_steps_;
  state.loader = loader_fields(loader.value_or(train_loader_->position()));
  save_precision_state(state, scaler_ ? &*scaler_ : nullptr, model_->fp8());
  if (model_->lora().enabled()) {
    state.values[kLoraBasePathKey] = lora_base_.path;
    state.values[kLoraBaseCrcKey] = fmt::format("{:08x}", lora_base_.crc32c);
  }
  // Rank 0 writes the checkpoint; with ZeRO-1 every rank adds its optimizer shard to the staging directory
  // rank 0 has created (the first barrier), and rank 0 lists them once all are written (the second).
  const int rank = comm_->rank(), world = comm_->world_size();
  OptimizerShardWriter write_shards;
  if (dp_->zero_stage() == 1)
    write_shards = [&](const std::string& staging_dir) {
      comm_->barrier();
      write_optimizer_shard(staging_dir, *optimizer_, model_->parameter_layout(), rank, world);
      comm_->barrier();
      std::vector<std::string> names;
      for (int r = 0; r < world; ++r) names.push_back(optimizer_shard_name(r, world));
      return names;
    };
  checkpointed_step_ = step_;
  if (rank != 0) {
    if (write_shards) write_shards(checkpoint_staging_dir(config_.log.run_dir, step_));
    return checkpoint_dir(config_.log.run_dir, step_);
  }
  std::string dir = save_checkpoint(config_.log.run_dir, state, *model_, *optimizer_, config_yaml_, write_shards);
  prune_checkpoints(config_.log.run_dir, config_.checkpoint.keep_last);
  spdlog::info("checkpoint written: {}", dir);
  if (config_.log.report) write_run_report_or_warn(config_.log.run_dir);
  return dir;
}

void Trainer::fail_keeping_last_good_state(const std::exception& error, std::optional<LoaderPosition> good,
                                           int64_t first_step) {
  // Only a state between steps is worth saving, and only where one process can save it alone: rank 0 of
  // a job whose optimizer state is not sharded (ZeRO-1 checkpoints take every rank, which may be gone).
  const bool alone = comm_->world_size() == 1 || (comm_->rank() == 0 && dp_->zero_stage() == 0);
  if (!good || !alone) throw;
  if (step_ == checkpointed_step_)
    GPT_FAIL("{}; the last good state, step {}, is the checkpoint '{}'; fix the cause and continue with --set "
             "train.resume=true", error.what(), step_, checkpoint_dir(config_.log.run_dir, step_));
  if (step_ == first_step)
    GPT_FAIL("{}; no step was completed since the start, so there is nothing new to save", error.what());
  spdlog::error("{}; writing a checkpoint of the last good state, step {}", message_for_log(error.what()), step_);
  std::string dir;
  try {
    dir = write_checkpoint(good);
  } catch (const std::exception& e) {
    GPT_FAIL("{}; writing a checkpoint of step {} failed too: {}", error.what(), step_, e.what());
  }
  GPT_FAIL("{}; the last good state, step {}, is in '{}'; fix the cause and continue with --set train.resume=true",
           error.what(), step_, dir);
}

void Trainer::train_loop(TrainSummary& summary, int64_t first_step, double& total_ms,
                         std::optional<LoaderPosition>& good) {
  const TrainConfig& t = config_.train;
  const size_t micro = static_cast<size_t>(t.batch_size) * t.seq_len;
  auto due = [](int64_t step, int every) { return every > 0 && step % every == 0; };
  while (step_ < t.steps && !stop_everywhere()) {
    const LoaderPosition before_step = train_loader_->position();
    good = before_step;
    for (int k = 0; k < t.grad_accum_steps; ++k)
      train_loader_->next_batch(std::span(inputs_).subspan(k * micro, micro), std::span(targets_).subspan(k * micro, micro));
    // The first step of a process also measures what it wrote of the activation arena.
    const bool measure = step_ == first_step;
    std::optional<DeviceMemoryUse> device_before;
    if (measure) {
      poison_arena(model_->activation_arena(), *backend_);
      device_before = backend_->device_memory();
    }
    good.reset();
    const StepResult r = train_step(inputs_, targets_);
    if (r.nonfinite.empty() || t.on_nonfinite != "stop") good = train_loader_->position();
    if (measure) {
      const MeasuredMemory measured = measure_step_memory(model_->activation_arena(), *backend_, device_before);
      summary.measured_activation_bytes = measured.activations;
      const MemoryLedger ledger = rank_ledger();
      const PlannedVsMeasured check = compare_with_ledger(ledger, measured);
      for (const std::string& line : check.lines) {
        if (check.equal) spdlog::debug("{}", line);
        else spdlog::warn("{}", line);
      }
      for (const std::string& note : check.notes) spdlog::info("{}", note);
      if (metrics_) {
        JsonLine line;
        line.add("step", r.step)
            .add("memory_planned_bytes", static_cast<int64_t>(ledger.total()))
            .add("activations_planned_bytes", static_cast<int64_t>(model_->activation_plan().total_bytes()))
            .add("activations_measured_bytes", static_cast<int64_t>(measured.activations));
        if (measured.device_after) line.add("device_total_bytes", static_cast<int64_t>(measured.device_after->total));
        metrics_->write(line);
      }
    }
    if (!r.nonfinite.empty() && t.on_nonfinite == "stop") {
      summary.status = TrainStatus::NonFinite;
      summary.message = fmt::format("step {}: {}; stopped without applying it (train.on_nonfinite: stop)", r.step,
                                    r.nonfinite);
      spdlog::error("{}", summary.message);
      summary.last_checkpoint =
          checkpointed_step_ == step_ ? checkpoint_dir(config_.log.run_dir, step_) : write_checkpoint(before_step);
      break;
    }
    if (!r.nonfinite.empty())
      spdlog::warn("step {}: {}; update skipped (train.on_nonfinite: skip; {} skipped so far)", r.step, r.nonfinite,
                   skipped_steps_);
    if (auto warning = contention_->after_step()) spdlog::warn("{}", *warning);
    const bool last = step_ == t.steps;
    summary.last_loss = r.loss;
    total_ms += r.ms;
    const double tokens_per_s = static_cast<double>(inputs_.size()) * dp_->world_size() / (r.ms / 1000.0);
    eta_.add_step_ms(r.ms);
    const double eta_s = eta_.seconds_left(t.steps - step_);
    if (r.overflow)
      spdlog::warn("step {}: fp16 gradients overflowed at loss scale {:g}; update skipped, scale backed off to {:g} "
                   "({} overflowed steps so far)",
                   r.step, r.loss_scale, scaler_->scale(), r.overflow_steps);
    const bool fp8 = model_->fp8() != nullptr;
    const double fp8_values = std::max<double>(1.0, static_cast<double>(r.fp8.values));
    if (due(r.step, config_.log.every) || last || r.step == first_step + 1) {
      std::string precision;
      if (scaler_) precision = fmt::format(" | scale {:g} | overflows {}", r.loss_scale, r.overflow_steps);
      if (fp8)
        precision = fmt::format(" | fp8 scale {:.3g}..{:.3g} amax {:.3g} underflow {:.2f}% saturated {:.3f}%",
                                r.fp8.scale_min, r.fp8.scale_max, r.fp8.amax_max,
                                100.0 * static_cast<double>(r.fp8.underflows) / fp8_values,
                                100.0 * static_cast<double>(r.fp8.saturated) / fp8_values);
      spdlog::info("step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f}{} | {:.1f} ms | {:.0f} tok/s | eta {}", r.step,
                   t.steps, r.loss, r.lr, r.grad_norm, precision, r.ms, tokens_per_s, format_duration(eta_s));
    }
    if (metrics_) {
      JsonLine line;
      line.add("step", r.step)
          .add("loss", r.loss)
          .add("lr", r.lr)
          .add("grad_norm", r.grad_norm)
          .add("ms", r.ms)
          .add("tokens_per_s", tokens_per_s)
          .add("target_tokens", r.target_tokens)
          .add("skipped", static_cast<int64_t>(!r.applied))
          .add("peak_rss_bytes", static_cast<int64_t>(peak_resident_bytes()));
      // Nothing is allocated inside a step, so what the run holds at its end is its peak; the device's count
      // (cudaMemGetInfo) shows what else the device holds, the other processes' included.
      if (const std::optional<DeviceMemoryUse> device = backend_->device_memory())
        line.add("device_held_bytes", static_cast<int64_t>(device->held))
            .add("device_used_bytes", static_cast<int64_t>(device->used));
      if (scaler_) line.add("loss_scale", r.loss_scale).add("overflow_steps", r.overflow_steps);
      if (fp8)
        line.add("fp8_scale_min", static_cast<double>(r.fp8.scale_min))
            .add("fp8_scale_max", static_cast<double>(r.fp8.scale_max))
            .add("fp8_amax_max", static_cast<double>(r.fp8.amax_max))
            .add("fp8_underflow_frac", static_cast<double>(r.fp8.underflows) / fp8_values)
            .add("fp8_saturated_frac", static_cast<double>(r.fp8.saturated) / fp8_values);
      metrics_->write(line);
    }

    // every: 0 means never; otherwise the last step is evaluated and sampled too.
    if (val_loader_ && t.eval_every > 0 && (due(r.step, t.eval_every) || last)) {
      summary.last_val_loss = evaluate();
      spdlog::info("step {:>5} | val loss {:.4f}", r.step, *summary.last_val_loss);
      if (metrics_) metrics_->write(JsonLine().add("step", r.step).add("val_loss", *summary.last_val_loss));
    }
    if (comm_->rank() == 0 && t.sample_tokens > 0 && t.sample_every > 0 && (due(r.step, t.sample_every) || last)) {
      summary.last_sample = sample();
      spdlog::info("step {:>5} | sample:\n{}", r.step, summary.last_sample);
      if (metrics_) metrics_->write(JsonLine().add("step", r.step).add("sample", summary.last_sample));
    }
    if (due(r.step, config_.checkpoint.every) && !last && !stop_everywhere()) {
      good.reset();
      summary.last_checkpoint = write_checkpoint();
      good = train_loader_->position();
    }
  }
}

TrainSummary Trainer::run() {
  log_start();
  const TrainConfig& t = config_.train;
  TrainSummary summary;
  const int64_t first_step = step_;
  if (step_ >= t.steps)
    spdlog::info("nothing to do: the run is at step {} and train.steps is {}; raise train.steps to train further", step_,
                 t.steps);
  double total_ms = 0.0;
  // The loader position that goes with the model's state whenever that state is a consistent one to save
  // (between steps); empty while a step or a checkpoint is under way.
  std::optional<LoaderPosition> good;
  try {
    train_loop(summary, first_step, total_ms, good);
  } catch (const std::exception& e) {
    fail_keeping_last_good_state(e, good, first_step);
  }
  if (summary.status != TrainStatus::NonFinite && stop_ && step_ < t.steps) {
    summary.status = TrainStatus::Interrupted;
    summary.message = fmt::format("stopped after step {} of {} on request (signal {})", step_, t.steps, stop_signal());
  }
  // Rank 0's view of the run directory decides for every rank (ZeRO-1 checkpoints are collective).
  double write_final = summary.status != TrainStatus::NonFinite && comm_->rank() == 0 &&
                       ((step_ > first_step && checkpointed_step_ != step_) || !latest_checkpoint(config_.log.run_dir));
  dp_->all_reduce({&write_final, 1});
  if (write_final > 0) summary.last_checkpoint = write_checkpoint();
  summary.steps_done = step_ - first_step;
  summary.skipped_steps = skipped_steps_;
  if (summary.steps_done > 0)
    spdlog::info("done: {} steps in {} ({:.1f} ms/step)", summary.steps_done, format_duration(total_ms / 1000.0),
                 total_ms / static_cast<double>(summary.steps_done));
  return summary;
}

}  // namespace gpt

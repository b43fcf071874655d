#include "train/trainer.h"

#include "io/checkpoint.h"
#include "io/llmc_model_file.h"
#include "optim/lr_schedule.h"
#include "train/sampler.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace gpt {
namespace {

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_bytes(size_t bytes) {
  const double mib = static_cast<double>(bytes) / (1 << 20);
  return mib >= 1024 ? fmt::format("{:.2f} GiB", mib / 1024) : fmt::format("{:.1f} MiB", mib);
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

}  // namespace

Trainer::Trainer(const Config& config, std::string config_yaml)
    : config_(config), config_yaml_(std::move(config_yaml)) {
  const TrainConfig& t = config_.train;
  backend_ = make_backend(parse_backend_kind(t.backend), t.threads);
  model_ = std::make_unique<GPT>(config_.model, t.batch_size, t.seq_len, *backend_);
  optimizer_ = std::make_unique<AdamW>(config_.optim, model_->parameter_layout(), *backend_);
  tokenizer_ = make_tokenizer(config_.data.tokenizer);

  DataLoaderOptions train_opts{config_.data.train, t.batch_size, t.seq_len, config_.model.vocab_size, true, t.seed};
  train_loader_ = std::make_unique<DataLoader>(train_opts);
  if (!config_.data.val.empty()) {
    DataLoaderOptions val_opts{config_.data.val, t.batch_size, t.seq_len, config_.model.vocab_size, false, t.seed};
    val_loader_ = std::make_unique<DataLoader>(val_opts);
  }
  inputs_.resize(static_cast<size_t>(t.grad_accum_steps) * t.batch_size * t.seq_len);
  targets_.resize(inputs_.size());

  if (!config_.model.init_from.empty()) {
    const LlmcModelHeader header = read_llmc_header(config_.model.init_from);
    std::vector<float> params(header.num_parameters());
    LlmcModelHeader expected;
    expected.max_seq_len = config_.model.context_length;
    expected.vocab_size = config_.model.vocab_size;
    expected.num_layers = config_.model.n_layer;
    expected.num_heads = config_.model.n_head;
    expected.channels = config_.model.n_embd;
    expected.padded_vocab_size = config_.model.padded_vocab_size();
    read_llmc_parameters(config_.model.init_from, expected, params);
    model_->parameters_from_host(params);
    spdlog::info("initialised {} parameters from llm.c checkpoint '{}'", params.size(), config_.model.init_from);
  } else {
    model_->init_weights(t.seed);
  }

  fs::create_directories(config_.log.run_dir);
  if (t.resume) {
    if (auto dir = latest_checkpoint(config_.log.run_dir)) {
      CheckpointState state = load_checkpoint(*dir, *model_, *optimizer_);
      train_loader_->restore(loader_position(state.loader, *dir));
      step_ = state.step;
      spdlog::info("resumed from '{}' at step {}", *dir, step_);
    } else {
      spdlog::info("train.resume is set but '{}' has no checkpoint yet; starting fresh", config_.log.run_dir);
    }
  }
  {
    std::ofstream out(fs::path(config_.log.run_dir) / "config.yaml");
    out << config_yaml_;
    GPT_CHECK(out.good(), "cannot write '{}/config.yaml'", config_.log.run_dir);
  }
  metrics_ = std::make_unique<MetricsWriter>((fs::path(config_.log.run_dir) / "metrics.jsonl").string());
}

Trainer::~Trainer() = default;

void Trainer::log_start() const {
  const TrainConfig& t = config_.train;
  spdlog::info("resolved configuration:\n{}", config_yaml_);
  spdlog::info("backend {} | model {} parameters (L{} C{} NH{} V{} padded to {})", backend_->name(),
               model_->num_parameters(), config_.model.n_layer, config_.model.n_embd, config_.model.n_head,
               config_.model.vocab_size, config_.model.padded_vocab_size());
  spdlog::info("batch: {} micro-batches x {} sequences x {} tokens = {} tokens per step", t.grad_accum_steps,
               t.batch_size, t.seq_len, static_cast<int64_t>(t.grad_accum_steps) * t.batch_size * t.seq_len);
  const size_t params = model_->parameter_arena().layout().total_bytes();
  spdlog::info("memory: parameters {} | gradients {} | AdamW state {} | activations {}", format_bytes(params),
               format_bytes(model_->gradient_arena().layout().total_bytes()), format_bytes(2 * params),
               format_bytes(model_->activation_arena().layout().total_bytes()));
  spdlog::info("train data: {} shards, {} samples of {} tokens per epoch", train_loader_->shard_paths().size(),
               train_loader_->num_samples(), t.seq_len);
}

StepResult Trainer::train_step(std::span<const int32_t> inputs, std::span<const int32_t> targets) {
  const TrainConfig& t = config_.train;
  const size_t micro = static_cast<size_t>(t.batch_size) * t.seq_len;
  GPT_CHECK(inputs.size() == micro * t.grad_accum_steps && targets.size() == inputs.size(),
            "train_step needs {} inputs and targets", micro * t.grad_accum_steps);
  const auto start = std::chrono::steady_clock::now();
  StepResult r;
  // The step's loss is the mean over every counted target token of all K micro-batches, so each
  // micro-batch's token losses are scaled by 1/N up front; K never enters the normalisation.
  for (int32_t target : targets) r.target_tokens += target != -1;
  GPT_CHECK(r.target_tokens > 0, "step {}: every target of the batch is masked (-1)", step_ + 1);
  const float dloss = static_cast<float>(1.0 / static_cast<double>(r.target_tokens));

  model_->zero_grads();
  double loss_sum = 0.0;
  for (int k = 0; k < t.grad_accum_steps; ++k) {
    StepContext ctx{t.seed, static_cast<uint32_t>(step_), static_cast<uint32_t>(k), true};
    model_->forward(inputs.subspan(k * micro, micro), targets.subspan(k * micro, micro), t.batch_size, t.seq_len, ctx,
                    dloss);
    loss_sum += model_->loss_sum();
    model_->backward(ctx);
  }
  r.loss = loss_sum / static_cast<double>(r.target_tokens);
  r.grad_norm = std::sqrt(model_->gradient_norm_squared());
  const double clip = config_.optim.grad_clip;
  const double grad_scale = clip > 0.0 && r.grad_norm > clip ? clip / r.grad_norm : 1.0;
  r.lr = learning_rate(config_.optim, static_cast<int>(step_), t.steps);
  optimizer_->step(model_->parameter_arena(), model_->gradient_arena(), r.lr, grad_scale);
  backend_->synchronize();
  r.step = ++step_;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
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
  for (uint64_t b = 0; b < batches; ++b) {
    val_loader_->next_batch(in, tg);
    model_->forward(in, tg, t.batch_size, t.seq_len, ctx);
    loss_sum += model_->loss_sum();
    for (int32_t target : tg) counted += target != -1;
  }
  GPT_CHECK(counted > 0, "the validation data holds no target tokens");
  return loss_sum / static_cast<double>(counted);
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
  std::vector<int> tokens = generate(*model_, prompt, options, rng);
  // A model with a larger vocabulary than the tokenizer may emit ids the tokenizer cannot decode.
  for (int& token : tokens)
    if (token >= tokenizer_->vocab_size()) token = tokenizer_->eot_token();
  return t.sample_prompt + tokenizer_->decode(tokens);
}

std::string Trainer::write_checkpoint() {
  CheckpointState state;
  state.step = step_;
  state.seed = config_.train.seed;
  state.loader = loader_fields(train_loader_->position());
  std::string dir = save_checkpoint(config_.log.run_dir, state, *model_, *optimizer_, config_yaml_);
  prune_checkpoints(config_.log.run_dir, config_.checkpoint.keep_last);
  spdlog::info("checkpoint written: {}", dir);
  return dir;
}

TrainSummary Trainer::run() {
  log_start();
  const TrainConfig& t = config_.train;
  const size_t micro = static_cast<size_t>(t.batch_size) * t.seq_len;
  TrainSummary summary;
  const int64_t first_step = step_;
  double total_ms = 0.0;
  auto due = [](int64_t step, int every) { return every > 0 && step % every == 0; };

  while (step_ < t.steps) {
    for (int k = 0; k < t.grad_accum_steps; ++k)
      train_loader_->next_batch(std::span(inputs_).subspan(k * micro, micro), std::span(targets_).subspan(k * micro, micro));
    const StepResult r = train_step(inputs_, targets_);
    const bool last = step_ == t.steps;
    summary.last_loss = r.loss;
    total_ms += r.ms;
    const double tokens_per_s = static_cast<double>(inputs_.size()) / (r.ms / 1000.0);
    const double eta_s = total_ms / 1000.0 / static_cast<double>(step_ - first_step) * static_cast<double>(t.steps - step_);
    if (due(r.step, config_.log.every) || last || r.step == first_step + 1)
      spdlog::info("step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.1f} ms | {:.0f} tok/s | eta {}", r.step,
                   t.steps, r.loss, r.lr, r.grad_norm, r.ms, tokens_per_s, format_duration(eta_s));
    metrics_->write(JsonLine()
                        .add("step", r.step)
                        .add("loss", r.loss)
                        .add("lr", r.lr)
                        .add("grad_norm", r.grad_norm)
                        .add("ms", r.ms)
                        .add("tokens_per_s", tokens_per_s)
                        .add("target_tokens", r.target_tokens));
    if (!std::isfinite(r.loss)) GPT_FAIL("step {}: the loss is {}; stopping", r.step, r.loss);

    if (val_loader_ && (due(r.step, t.eval_every) || last)) {
      summary.last_val_loss = evaluate();
      spdlog::info("step {:>5} | val loss {:.4f}", r.step, *summary.last_val_loss);
      metrics_->write(JsonLine().add("step", r.step).add("val_loss", *summary.last_val_loss));
    }
    if (t.sample_tokens > 0 && (due(r.step, t.sample_every) || last)) {
      summary.last_sample = sample();
      spdlog::info("step {:>5} | sample:\n{}", r.step, summary.last_sample);
      metrics_->write(JsonLine().add("step", r.step).add("sample", summary.last_sample));
    }
    if (due(r.step, config_.checkpoint.every) && !last) summary.last_checkpoint = write_checkpoint();
  }
  if (step_ > first_step || !latest_checkpoint(config_.log.run_dir)) summary.last_checkpoint = write_checkpoint();
  summary.steps_done = step_ - first_step;
  if (summary.steps_done > 0)
    spdlog::info("done: {} steps in {} ({:.1f} ms/step)", summary.steps_done, format_duration(total_ms / 1000.0),
                 total_ms / static_cast<double>(summary.steps_done));
  return summary;
}

}  // namespace gpt

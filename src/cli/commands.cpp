#include "cli/commands.h"

#include "backend/cuda_entry.h"
#include "bench/bench_command.h"
#include "cli/args.h"
#include "cli/openmp_env.h"
#include "cli/export_command.h"
#include "cli/report_command.h"
#include "cli/signals.h"
#include "cli/tokenize_command.h"
#include "config/config_loader.h"
#include "core/printable.h"
#include "data/prepare.h"
#include "data/tokenizer.h"
#include "dist/mpi_communicator.h"
#include "dist/single_communicator.h"
#include "io/checkpoint.h"
#include "io/durable_file.h"
#include "io/llmc_model_file.h"
#include "io/lora_adapters.h"
#include "memory/levers.h"
#include "memory/levers_report.h"
#include "memory/plan_report.h"
#include "memory/recompute.h"
#include "model/kv_cache_decoder.h"
#include "precision/recipe.h"
#include "train/memory_check.h"
#include "train/precision_state.h"
#include "train/resume.h"
#include "train/sampler.h"
#include "train/trainer.h"

#include <cblas.h>
#include <omp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <iostream>

#include <unistd.h>

namespace fs = std::filesystem;

namespace gpt {
namespace {

const std::vector<OptionSpec> kTrainOptions = {
    {"set", "KEY=VALUE", "Override a config key, e.g. --set train.steps=100 (repeatable).", true},
};

const std::vector<OptionSpec> kPrepareOptions = {
    {"input", "FILE", "Text file to tokenize (required)."},
    {"out", "DIR", "Directory for train_*.bin and val_*.bin shards (required)."},
    {"val-fraction", "F", "Fraction of tokens (jsonl: of examples), taken from the end, held out for validation (default 0.1)."},
    {"tokenizer", "NAME", "Tokenizer: byte (default) or gpt2."},
    {"tokenizer-path", "DIR", "gpt2: directory of encoder.json + vocab.bpe or vocab.json + merges.txt (default ~/.cache/gpt-train/gpt2)."},
    {"shard-tokens", "N", "Tokens per shard file (default 100000000, as llm.c's prepare scripts write them)."},
    {"format", "FORMAT", "text (default): one document; jsonl: instruction data, prompts masked out of the loss (README)."},
    {"seq-len", "T", "jsonl: pad one example per row of T tokens, the model's train.seq_len (the default layout)."},
    {"pack", "", "jsonl: pack examples back to back instead (no padding, but attention sees across examples)."},
    {"skip-bad", "", "jsonl: leave out bad lines, each reported with its line number, instead of stopping at the first."},
};

const std::vector<OptionSpec> kSampleOptions = {
    {"prompt", "TEXT", "Text to continue (default: start from the end-of-text token)."},
    {"prompt-file", "FILE", "Read the text to continue from FILE (UTF-8, used as it is: a final newline counts)."},
    {"max-tokens", "N", "Tokens to generate (default 200)."},
    {"tokens", "N", "Same as --max-tokens (its earlier name)."},
    {"temperature", "T", "Sampling temperature (default 1.0)."},
    {"top-k", "K", "Sample among the K most likely tokens only (default 0 = all)."},
    {"top-p", "P", "Then among the fewest most likely tokens whose probability reaches P (default 1 = all)."},
    {"no-cache", "", "Rerun the whole window for every token instead of using the KV cache (for comparison)."},
    {"recipe", "NAME", "Compute format: fp32 (default, the FP32 master weights), bf16, fp16, fp8, or run (the run's precision section; fp8 with the checkpoint's scales)."},
    {"seed", "S", "Random seed (default 1)."},
    {"threads", "N", "CPU threads (default: all cores)."},
    {"backend", "NAME", "Where the model runs: cpu (default), cuda, or auto (CUDA when a GPU is present)."},
};

const std::vector<OptionSpec> kPlanOptions = {
    {"set", "KEY=VALUE", "Override a config key (repeatable).", true},
    {"budget", "SIZE", "Mark which rows fit this much memory, e.g. 8GiB, or auto (what the backend's device can give a run now) (default: memory.budget, if set); with --levers, the budget the planner rows fit."},
    {"levers", "", "Print the table of memory levers instead: each precision, accumulation, recompute and ZeRO-1 lever alone, stacked, and the planner's choice per budget."},
    {"json", "", "With --levers: print the table as JSON, for scripts."},
};

const std::vector<OptionSpec> kConfigOptions = {
    {"set", "KEY=VALUE", "Override a config key (repeatable).", true},
    {"reference", "", "Print the Markdown reference of every config key instead."},
};

int train(const std::vector<std::string>& argv, Communicator& comm) {
  ParsedArgs args = parse_args("train", argv, kTrainOptions);
  GPT_CHECK(args.positionals.size() == 1, "usage: gpt-train train CONFIG.yaml [--set key=value ...]");
  Config config = load_config(args.positionals[0], args.all("set"));
  // Rank 0 logs at log.level; the others only warnings and errors unless dist.log_all_ranks.
  const auto level = spdlog::level::from_str(config.log.level);
  spdlog::set_level(comm.rank() == 0 || config.dist.log_all_ranks ? level : std::max(level, spdlog::level::warn));
  comm.set_timeout(config.dist.timeout_s);
  install_stop_signal_handlers(comm.world_size() > 1);
  spdlog::debug("{}", openmp_wait_description());
  Trainer trainer(config, config_to_yaml(config), &comm);
  TrainSummary summary = trainer.run();
  if (summary.last_val_loss) spdlog::info("final val loss {:.4f}", *summary.last_val_loss);
  if (summary.skipped_steps > 0) spdlog::warn("{} steps were not applied (non-finite loss or gradients)", summary.skipped_steps);
  switch (summary.status) {
    case TrainStatus::Completed: return 0;
    case TrainStatus::Interrupted:
      spdlog::info("{}; checkpoint '{}'; continue with --set train.resume=true", summary.message,
                   summary.last_checkpoint.empty() ? latest_checkpoint(config.log.run_dir).value_or("none")
                                                   : summary.last_checkpoint);
      return 0;
    case TrainStatus::NonFinite:
      spdlog::error("{}; the last good state is in '{}'", summary.message, summary.last_checkpoint);
      return 1;
  }
  return 1;
}

// Started by an MPI launcher (mpirun, srun), every process runs this as one rank of a data-parallel job;
// a plain start never initialises MPI. An error on any rank is logged there and ends the whole job
// (MPI_Abort), instead of leaving the other ranks waiting in their next collective.
int run_train(const std::vector<std::string>& argv) {
  std::optional<MpiRuntime> mpi;
  std::unique_ptr<Communicator> comm;
  if (launched_by_mpi_launcher()) {
    mpi.emplace();
    comm = std::make_unique<MpiCommunicator>();
    // Open MPI gives each rank's stdout a pseudo-terminal whatever mpirun's own output is, so the default
    // sink's isatty test would write colour codes into the job's log file (an sbatch script's output).
    spdlog::set_default_logger(spdlog::stdout_logger_mt("train"));
    spdlog::set_pattern(comm->rank() == 0 ? std::string("[%H:%M:%S] %^%l%$ %v")
                                          : fmt::format("[%H:%M:%S] [rank {}] %^%l%$ %v", comm->rank()));
  } else {
    comm = std::make_unique<SingleCommunicator>();
  }
  try {
    return train(argv, *comm);
  } catch (const std::exception& e) {
    if (comm->world_size() == 1) throw;
    spdlog::error("{}; aborting all {} ranks", message_for_log(e.what()), comm->world_size());
    MpiRuntime::abort_job(1);
  }
}

int run_prepare(const std::vector<std::string>& argv) {
  ParsedArgs args = parse_args("prepare", argv, kPrepareOptions);
  GPT_CHECK(args.positionals.empty(), "gpt-train prepare takes no positional arguments (got '{}')",
            args.positionals.empty() ? "" : args.positionals[0]);
  PrepareOptions options;
  options.input = args.get("input");
  options.out_dir = args.get("out");
  GPT_CHECK(!options.input.empty() && !options.out_dir.empty(), "usage: gpt-train prepare --input FILE --out DIR");
  options.val_fraction = args.get_double("val-fraction", options.val_fraction);
  GPT_CHECK(options.val_fraction >= 0.0 && options.val_fraction < 1.0, "--val-fraction must be in [0, 1), got {}",
            options.val_fraction);
  options.tokenizer = args.get("tokenizer", options.tokenizer);
  options.tokenizer_path = args.get("tokenizer-path", options.tokenizer_path);
  const int shard_tokens = args.get_int("shard-tokens", static_cast<int>(options.shard_tokens));
  GPT_CHECK(shard_tokens >= 1, "--shard-tokens must be at least 1, got {}", shard_tokens);
  options.shard_tokens = static_cast<size_t>(shard_tokens);
  options.format = args.get("format", options.format);
  options.seq_len = args.get_int("seq-len", options.seq_len);
  GPT_CHECK(!args.has("seq-len") || options.seq_len >= 2, "--seq-len must be at least 2, got {}", options.seq_len);
  options.pack = args.has("pack");
  options.skip_bad = args.has("skip-bad");
  prepare_dataset(options);
  return 0;
}

}  // namespace

// A checkpoint directory (which must be intact), or a run directory: its newest intact checkpoint, past
// damaged ones as a resume would go, but leaving the run directory as it is.
std::string resolve_checkpoint(const std::string& path) {
  if (fs::exists(fs::path(path) / kManifestFile)) {
    const auto problems = verify_checkpoint(path);
    GPT_CHECK(problems.empty(), "checkpoint '{}' is damaged: {}; name its run directory to use the newest intact one",
              path, fmt::join(problems, "; "));
    return path;
  }
  auto dir = select_resume_checkpoint(path, "previous", /*set_aside=*/false);
  GPT_CHECK(dir.has_value(), "'{}' is neither a checkpoint directory nor a run directory with checkpoints", path);
  return *dir;
}

namespace {

// The recipe `gpt-train sample --recipe NAME` decodes in: the run's own precision section, or another
// recipe with the run's FP8 settings (gradients play no part in sampling, so they stay FP32).
PrecisionRecipe sample_recipe(const PrecisionConfig& run, const std::string& name) {
  if (name == "run") return precision_recipe(run);
  GPT_CHECK(name == "fp32" || name == "bf16" || name == "fp16" || name == "fp8",
            "--recipe: '{}' is not a recipe; give fp32, bf16, fp16, fp8 or run (the run's own)", name);
  PrecisionConfig precision = run;
  precision.recipe = name;
  precision.grad_dtype = "fp32";
  return precision_recipe(precision);
}

int run_sample(const std::vector<std::string>& argv) {
  ParsedArgs args = parse_args("sample", argv, kSampleOptions);
  GPT_CHECK(args.positionals.size() == 1, "usage: gpt-train sample RUN_OR_CHECKPOINT_DIR [options]");
  // stdout carries the sample alone, so that it can be piped; messages go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_st("sample"));
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  const std::string dir = resolve_checkpoint(args.positionals[0]);
  Config config = load_config((fs::path(dir) / "config.yaml").string());
  auto backend = make_backend(parse_backend_kind(args.get("backend", "cpu")), {args.get_int("threads", 0)});
  // Planned for the whole context, not the run's train.seq_len: the cache holds model.context_length
  // positions, and --no-cache must see the same window to draw the same tokens.
  const PrecisionRecipe recipe = sample_recipe(config.precision, args.get("recipe", "fp32"));
  recipe.check_fp8_products(backend->capabilities(), config.model.n_embd, config.model.n_layer, "--recipe bf16");
  GPT model(config.model, 1, config.model.context_length, *backend, DType::F32, {}, recipe);
  if (fs::exists(fs::path(dir) / kAdaptersFile)) {
    // A LoRA checkpoint samples its merged weights: the same model within FP32 rounding, and the KV cache,
    // which reads one set of weights, applies.
    auto cpu = make_backend(BackendKind::Cpu);
    GPT lora(config.model, 1, 1, *cpu, DType::F32, {}, precision_recipe(config.precision),
             LoraSpec::from_config(config.finetune));
    model.parameters_from_host(merged_parameters(load_lora_checkpoint(config, dir, lora), lora));
  } else {
    model.parameters_from_host(read_llmc_parameters((fs::path(dir) / "model.bin").string(), llmc_header_of(config.model)));
  }
  if (model.fp8()) {
    // The scales the run had reached (delayed scaling derives them from its amax history).
    CheckpointState state;
    const fs::path blob = fs::path(dir) / "blob.fp8_scaling";
    if (fs::exists(blob)) state.blobs["fp8_scaling"] = read_file_bytes(blob.string());
    restore_precision_state(state, dir, nullptr, model.fp8());
  }

  auto tokenizer = make_tokenizer(config.data.tokenizer, config.data.tokenizer_path);
  GPT_CHECK(!(args.has("prompt") && args.has("prompt-file")), "give --prompt or --prompt-file, not both");
  GPT_CHECK(!(args.has("tokens") && args.has("max-tokens")), "give --max-tokens (or its old name --tokens), not both");
  const std::string prompt_text = args.has("prompt-file") ? read_file_bytes(args.get("prompt-file")) : args.get("prompt");
  std::vector<int> prompt = tokenizer->encode(prompt_text);
  if (prompt.empty()) prompt.push_back(tokenizer->eot_token());
  SampleOptions options{args.get_int("max-tokens", args.get_int("tokens", 200)), args.get_double("temperature", 1.0), args.get_int("top-k", 0),
                        args.get_double("top-p", 1.0)};
  GPT_CHECK(options.tokens >= 0 && options.temperature > 0 && options.top_k >= 0 && options.top_p > 0 &&
                options.top_p <= 1,
            "--max-tokens and --top-k must be >= 0, --temperature > 0 and --top-p in (0, 1]");
  HostRng rng(static_cast<uint64_t>(args.get_int("seed", 1)), 0);
  // A model with a larger vocabulary than the tokenizer may emit ids the tokenizer cannot decode.
  // Raw bytes into a pipe or file (what the model wrote); on a terminal, ESC, NUL and friends are escaped
  // rather than let act as terminal commands.
  const bool terminal = ::isatty(STDOUT_FILENO);
  const auto shown = [&](const std::string& text) { return terminal ? printable(text) : text; };
  const auto text_of = [&](int token) {
    return shown(tokenizer->decode(std::vector<int>{token < tokenizer->vocab_size() ? token : tokenizer->eot_token()}));
  };
  const bool cached = !args.has("no-cache");
  GPT_CHECK(!cached || KvCacheDecoder::supports(model),
            "the {} backend does not decode the {} recipe with the KV cache; add --no-cache, or --recipe fp32",
            backend->name(), recipe_name(model.precision().recipe));
  std::cout << shown(prompt_text) << std::flush;
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> tokens;
  if (cached) {
    tokens = generate_cached(model, prompt, options, rng, [&](int token) { std::cout << text_of(token) << std::flush; });
  } else {
    tokens = generate(model, prompt, options, rng);
    for (const int token : tokens) std::cout << text_of(token);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << std::endl;
  spdlog::info("{} tokens in {:.2f} s: {:.1f} tokens/s ({}, {}; prompt {} tokens)", tokens.size(), seconds,
               static_cast<double>(tokens.size()) / std::max(seconds, 1e-9),
               cached ? "KV cache" : "no cache: the whole window reruns per token",
               recipe_name(model.precision().recipe), prompt.size());
  return 0;
}

int run_plan(const std::vector<std::string>& argv) {
  ParsedArgs args = parse_args("plan", argv, kPlanOptions);
  GPT_CHECK(args.positionals.size() == 1,
            "usage: gpt-train plan CONFIG.yaml [--budget 8GiB] [--levers [--json]] [--set key=value ...]");
  GPT_CHECK(!args.has("json") || args.has("levers"),
            "plan: --json prints the table of levers, which --levers asks for; add --levers (the recompute table "
            "has no JSON form)");
  if (args.has("json")) {
    // stdout carries the JSON alone, for scripts to parse; the backend's messages go to stderr.
    spdlog::set_default_logger(spdlog::stderr_color_st("plan"));
    spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  }
  Config config = load_config(args.positionals[0], args.all("set"));
  auto backend = make_backend(parse_backend_kind(config.train.backend),
                              {1, config.precision.tf32, parse_attention_kind(config.train.attention)});
  const std::optional<uint64_t> budget = resolve_memory_budget(args.get("budget", config.memory.budget), *backend,
                                                               args.has("budget") ? "--budget" : "memory.budget");
  const BackendCapabilities capabilities = backend->capabilities();
  if (args.has("levers")) {
    const LeverTable table = lever_table(config, budget, capabilities);
    if (args.has("json")) std::cout << lever_report_json(table, capabilities).dump(2) << "\n";
    else std::cout << lever_report(table, capabilities);
    return 0;
  }
  std::cout << plan_report(config, budget, capabilities);
  return 0;
}

int run_config(const std::vector<std::string>& argv) {
  ParsedArgs args = parse_args("config", argv, kConfigOptions);
  if (args.has("reference")) {
    std::cout << config_reference_markdown();
    return 0;
  }
  GPT_CHECK(args.positionals.size() == 1, "usage: gpt-train config CONFIG.yaml [--set key=value ...] | --reference");
  std::cout << config_to_yaml(load_config(args.positionals[0], args.all("set")));
  return 0;
}

int run_info(const std::vector<std::string>& argv) {
  parse_args("info", argv, {});
  std::cout << "cpu: " << omp_get_max_threads() << " OpenMP threads; BLAS: " << openblas_get_config() << "\n";
  std::cout << "waiting: " << openmp_wait_description() << "\n";
  std::cout << "cuda: " << cuda::describe() << "\n";
  return 0;
}

std::string train_help() {
  return "usage: gpt-train train CONFIG.yaml [--set key=value ...]\n\nTrain a GPT from a YAML config (see README "
         "for every key).\n\noptions:\n" + options_help(kTrainOptions);
}
std::string prepare_help() {
  return "usage: gpt-train prepare --input FILE.txt --out DIR [options]\n       gpt-train prepare --format jsonl "
         "--input FILE.jsonl --out DIR (--seq-len T | --pack) [options]\n\nTokenize a text file into llm.c token "
         "shards (train and val), or instruction data into shards with target masks.\n\noptions:\n" +
         options_help(kPrepareOptions);
}
std::string sample_help() {
  return "usage: gpt-train sample RUN_OR_CHECKPOINT_DIR [options]\n\nGenerate text from a checkpoint (a run "
         "directory uses its newest checkpoint).\n\noptions:\n" + options_help(kSampleOptions);
}
std::string plan_help() {
  return "usage: gpt-train plan CONFIG.yaml [--budget 8GiB] [--levers [--json]] [--set key=value ...]\n\nPrint, "
         "without training, what params, grads, optimizer state and activations will take for each recompute mode, "
         "and the extra forward FLOPs each costs; with --levers, for each memory lever (precision, accumulation, "
         "recomputation, ZeRO-1, LoRA when configured), and what each costs in recomputed FLOPs and traffic.\n\n"
         "options:\n" + options_help(kPlanOptions);
}
std::string config_help() {
  return "usage: gpt-train config CONFIG.yaml [--set key=value ...]\n       gpt-train config --reference\n\nPrint "
         "the resolved configuration, or the reference of every key.\n\noptions:\n" + options_help(kConfigOptions);
}
std::string info_help() { return "usage: gpt-train info\n\nPrint the CPU threads, BLAS build and CUDA devices.\n"; }

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> kCommands = {
      {"train", "train a model from a YAML config", run_train, train_help},
      {"prepare", "tokenize a text file into train/val token shards", run_prepare, prepare_help},
      {"sample", "generate text from a checkpoint", run_sample, sample_help},
      {"export", "write a checkpoint as a Hugging Face GPT-2 (safetensors) or an llm.c model file", run_export_command,
       export_help},
      {"tokenize", "print the token ids of a text (or, with --decode, the text of ids)", run_tokenize_command,
       tokenize_help},
      {"report", "draw loss, learning rate, throughput and memory of runs as PNG and SVG", run_report_command,
       report_help},
      {"plan", "print the memory ledger of each recompute mode or memory lever, without training", run_plan, plan_help},
      {"config", "print the resolved config, or the reference of all keys", run_config, config_help},
      {"info", "show CPU/BLAS threads and CUDA devices", run_info, info_help},
      {"bench", "time training steps: ms/step, tokens/s, MFU and time per op", bench::run_bench_command,
       bench::bench_help},
  };
  return kCommands;
}

std::string general_help() {
  std::string s = "gpt-train: train GPT-style language models from a YAML file.\n\nusage: gpt-train COMMAND [options]\n\ncommands:\n";
  for (const Command& c : commands()) s += fmt::format("  {:<10} {}\n", c.name, c.summary);
  s += "\nRun 'gpt-train COMMAND --help' for a command's options.\n";
  return s;
}

}  // namespace gpt

#include "cli/export_command.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "config/config_loader.h"
#include "core/error.h"
#include "core/progress.h"
#include "data/gpt2_tokenizer.h"
#include "io/durable_file.h"
#include "io/hf_gpt2.h"
#include "io/llmc_model_file.h"
#include "io/lora_adapters.h"
#include "precision/recipe.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

const std::vector<OptionSpec> kExportOptions = {
    {"format", "FORMAT", "hf (model.safetensors + config.json, for transformers' GPT2LMHeadModel) or llmc (an llm.c model file)."},
    {"out", "DIR", "Output directory (required)."},
    {"dtype", "DTYPE", "hf: f32 (default), bf16 or f16 (rounded to nearest even)."},
    {"merge", "", "A LoRA checkpoint: write the merged model, each targeted weight W + (alpha/rank) B A, in --format."},
    {"adapters", "", "A LoRA checkpoint: write the adapters alone in PEFT's layout (adapter_model.safetensors + "
                     "adapter_config.json) instead."},
};

// GPT-2's tokenizer files under Hugging Face's names, so AutoTokenizer loads the directory too.
void copy_gpt2_tokenizer(const Config& config, const fs::path& out, int context_length) {
  const fs::path dir = config.data.tokenizer_path.empty() ? fs::path(default_gpt2_tokenizer_dir())
                                                          : fs::path(config.data.tokenizer_path);
  for (const auto& [vocab, merges] : {std::pair{"vocab.json", "merges.txt"}, std::pair{"encoder.json", "vocab.bpe"}}) {
    if (!fs::exists(dir / vocab) || !fs::exists(dir / merges)) continue;
    const std::string vocab_bytes = read_file_bytes((dir / vocab).string());
    const std::string merges_bytes = read_file_bytes((dir / merges).string());
    replace_file_durably((out / "vocab.json").string(), {std::as_bytes(std::span(vocab_bytes.data(), vocab_bytes.size()))});
    replace_file_durably((out / "merges.txt").string(), {std::as_bytes(std::span(merges_bytes.data(), merges_bytes.size()))});
    const nlohmann::ordered_json tok = {{"tokenizer_class", "GPT2Tokenizer"}, {"model_max_length", context_length},
                                        {"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"},
                                        {"unk_token", "<|endoftext|>"}, {"add_prefix_space", false}};
    const std::string text = tok.dump(2) + "\n";
    replace_file_durably((out / "tokenizer_config.json").string(), {std::as_bytes(std::span(text.data(), text.size()))});
    return;
  }
  spdlog::warn("export: GPT-2's tokenizer files are not in {}; the export has no vocab.json / merges.txt",
               dir.string());
}

}  // namespace

int run_export_command(const std::vector<std::string>& argv) {
  const ParsedArgs args = parse_args("export", argv, kExportOptions);
  GPT_CHECK(args.positionals.size() == 1 && args.has("out"),
            "usage: gpt-train export RUN_OR_CHECKPOINT_DIR --format hf|llmc --out DIR");
  const std::string format = args.get("format", "hf");
  GPT_CHECK(format == "hf" || format == "llmc", "export: --format is '{}'; choices: hf, llmc", format);
  const std::string dir = resolve_checkpoint(args.positionals[0]);
  const Config config = load_config((fs::path(dir) / "config.yaml").string());
  const LlmcModelHeader header = llmc_header_of(config.model);
  const bool lora = fs::exists(fs::path(dir) / kAdaptersFile);
  GPT_CHECK(!(args.has("merge") && args.has("adapters")), "export: give --merge or --adapters, not both");
  GPT_CHECK(lora || !(args.has("merge") || args.has("adapters")),
            "export: '{}' holds a whole model (no LoRA adapters); --merge and --adapters are for LoRA checkpoints", dir);
  GPT_CHECK(!lora || args.has("merge") || args.has("adapters"),
            "export: '{}' holds LoRA adapters: give --merge (the merged model in --format) or --adapters (PEFT's layout)",
            dir);
  const fs::path out = args.get("out");
  // Reading and writing are one call each: the status line moves at the two, and the summary gives the rate.
  Progress progress("export", ProgressUnit::Bytes, 0);
  std::vector<float> params;
  if (lora) {
    // The run's own precision, so a base drawn from train.seed is rounded as the run held it; one position of
    // activations is all a model that only holds weights needs.
    auto backend = make_backend(BackendKind::Cpu);
    GPT model(config.model, 1, 1, *backend, DType::F32, {}, precision_recipe(config.precision),
              LoraSpec::from_config(config.finetune));
    params = load_lora_checkpoint(config, dir, model);
    if (args.has("adapters")) {
      write_peft_adapters(out.string(), model, config.model.init_from.empty() ? "gpt2" : config.model.init_from);
      progress.add(static_cast<uint64_t>(model.num_parameters()) * sizeof(float));
      progress.finish(fmt::format("{} LoRA parameters of {} written in PEFT's layout into {}", model.num_parameters(),
                                  dir, out.string()));
      return 0;
    }
    params = merged_parameters(std::move(params), model);
  } else {
    params = read_llmc_parameters((fs::path(dir) / "model.bin").string(), header);
  }
  progress.add(params.size() * sizeof(float));
  std::error_code ec;
  fs::create_directories(out, ec);
  GPT_CHECK(!ec, "export: cannot create {}: {}", out.string(), ec.message());
  if (format == "llmc") {
    write_llmc_model((out / "model.bin").string(), header, params);
    progress.add(params.size() * sizeof(float));
    progress.finish(fmt::format("{} parameters of {} read and written as llm.c model file {}", params.size(), dir,
                                (out / "model.bin").string()));
    return 0;
  }
  std::string dtype = args.get("dtype", "f32");
  for (char& c : dtype) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  GPT_CHECK(dtype == "F32" || dtype == "BF16" || dtype == "F16", "export: --dtype is '{}'; choices: f32, bf16, f16",
            args.get("dtype"));
  HfExportOptions options;
  options.dtype = dtype;
  options.eot_token = config.data.tokenizer == "gpt2" ? 50256 : '\n';
  export_hf_gpt2(out.string(), config.model, params, options);
  if (config.data.tokenizer == "gpt2") copy_gpt2_tokenizer(config, out, config.model.context_length);
  progress.add(params.size() * (dtype == "F32" ? 4 : 2));
  progress.finish(fmt::format("{} parameters of {} read and written as a Hugging Face GPT-2 ({}) into {}",
                              params.size(), dir, dtype, out.string()));
  return 0;
}

std::string export_help() {
  return "usage: gpt-train export RUN_OR_CHECKPOINT_DIR --format hf|llmc --out DIR [--dtype f32|bf16|f16] "
         "[--merge | --adapters]\n\nWrite a checkpoint's weights for other tools (a run directory uses its newest "
         "checkpoint). A LoRA run's checkpoint needs --merge or --adapters.\n\noptions:\n" +
         options_help(kExportOptions);
}

}  // namespace gpt

// LoRA runs through the trainer: only the adapters change, the loss falls as full fine-tuning's does, resume
// is exact and refuses another base, masking decides which targets count, and the export writes the merged
// model and PEFT's layout.
#include "train/trainer.h"

#include "cli/export_command.h"
#include "config/config_loader.h"
#include "io/llmc_model_file.h"
#include "io/lora_adapters.h"
#include "io/durable_file.h"
#include "io/hf_gpt2.h"
#include "io/safetensors.h"
#include "train/synthetic_run.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpt::test {
namespace {

std::vector<unsigned char> raw_bytes(Arena& arena) {
  const auto* p = static_cast<const unsigned char*>(arena.base());
  return std::vector<unsigned char>(p, p + arena.layout().total_bytes());
}

// A tiny model first trained in full on the permutation task, saved as an llm.c file: the base a LoRA run
// fine-tunes (a random base would leave little for the adapters to adapt).
Config lora_run(const TempDir& dir, int steps) {
  Config c = synthetic_run(dir, {1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10}, 30000, false);
  c.train.steps = steps;
  c.finetune.lora_rank = 4;
  c.finetune.lora_alpha = 8.0;
  c.optim.weight_decay = 0.0;
  return c;
}

std::map<int64_t, double> run_losses(Config c, const std::string& run_dir) {
  c.log.run_dir = run_dir;
  Trainer t(c, config_to_yaml(c));
  t.run();
  return logged_losses(run_dir);
}

TEST(LoraTraining, ChangesOnlyTheAdapters) {
  TempDir dir;
  Config c = lora_run(dir, 5);
  c.finetune.lora_dropout = 0.1;
  Trainer trainer(c, config_to_yaml(c));
  ASSERT_NE(trainer.model().base_arena(), nullptr);
  const std::vector<unsigned char> base = raw_bytes(*trainer.model().base_arena());
  const std::vector<float> adapters = trainer.model().parameters_to_host();
  EXPECT_EQ(trainer.model().num_parameters(), static_cast<int64_t>(adapters.size()));
  trainer.run();
  EXPECT_EQ(raw_bytes(*trainer.model().base_arena()), base);
  const std::vector<float> after = trainer.model().parameters_to_host();
  size_t changed = 0;
  for (size_t i = 0; i < after.size(); ++i) changed += after[i] != adapters[i];
  EXPECT_GT(changed, after.size() * 9 / 10);
  // The optimizer holds state for the adapters alone.
  EXPECT_EQ(trainer.optimizer().num_elements(), trainer.model().num_parameters());
}

// Fine-tuning a trained base on a new task (another permutation): LoRA (rank 4, all four targets) lowers the
// loss as full fine-tuning does. Stated tolerance: after 40 steps both are below 60% of the first step's
// loss, and LoRA's last loss is within 0.25 nats of full fine-tuning's.
TEST(LoraTraining, LowersTheLossLikeFullFineTuning) {
  TempDir dir;
  Config pre = synthetic_run(dir, permutation_pattern(), 20000, false);
  pre.train.steps = 60;
  pre.log.run_dir = dir.file("pretrain");
  {
    Trainer t(pre, config_to_yaml(pre));
    t.run();
    write_llmc_model(dir.file("base.bin"), llmc_header_of(pre.model), t.model().parameters_to_host());
  }
  Config task = lora_run(dir, 40);
  task.model.init_from = dir.file("base.bin");
  task.optim.warmup_steps = 5;
  Config full = task;
  full.finetune.lora_rank = 0;
  full.optim.lr = 3e-3;
  task.optim.lr = 2e-2;
  const auto lora = run_losses(task, dir.file("lora"));
  const auto whole = run_losses(full, dir.file("full"));
  ASSERT_EQ(lora.size(), 40u);
  ASSERT_EQ(whole.size(), 40u);
  EXPECT_DOUBLE_EQ(lora.begin()->second, whole.begin()->second);  // step 1: the same base, B = 0
  EXPECT_LT(lora.rbegin()->second, 0.6 * lora.begin()->second);
  EXPECT_LT(whole.rbegin()->second, 0.6 * whole.begin()->second);
  std::printf("  loss after 40 steps from %.4f: LoRA %.4f, full fine-tuning %.4f\n", lora.begin()->second,
              lora.rbegin()->second, whole.rbegin()->second);
  EXPECT_LT(std::abs(lora.rbegin()->second - whole.rbegin()->second), 0.25)
      << "LoRA " << lora.rbegin()->second << ", full " << whole.rbegin()->second;
}

// 3 steps, then a fresh trainer resuming for 3 more, equal 6 straight steps bit for bit (adapters, and the
// logged losses), with the model's and the adapters' dropout on and bf16 with selective recomputation.
TEST(LoraResume, ResumesBitwiseAndRefusesAnotherBase) {
  TempDir dir;
  for (const char* recipe : {"fp32", "bf16"}) {
    SCOPED_TRACE(recipe);
    Config c = lora_run(dir, 6);
    c.model.dropout = 0.1;
    c.finetune.lora_dropout = 0.1;
    c.precision.recipe = recipe;
    c.recompute.mode = std::string(recipe) == "bf16" ? "selective" : "none";
    c.log.run_dir = dir.file(std::string("straight_") + recipe);
    Trainer straight(c, config_to_yaml(c));
    straight.run();
    const std::string resumed = dir.file(std::string("resumed_") + recipe);
    EXPECT_EQ(weights_after_resume(c, 3, resumed), straight.model().parameters_to_host());
    EXPECT_EQ(logged_losses(resumed), logged_losses(c.log.run_dir));

    // Another base (drawn from another seed) under the same adapters is refused, naming both.
    Config other = c;
    other.log.run_dir = resumed;
    other.train.resume = true;
    other.train.seed = 99;
    other.train.steps = 8;
    const std::string message = error_message([&] { Trainer t(other, config_to_yaml(other)); });
    EXPECT_NE(message.find("trained on the base 'train.seed 1337'"), std::string::npos) << message;
    EXPECT_NE(message.find("this run's base is 'train.seed 99'"), std::string::npos) << message;
  }
}

// Masked targets (-1) leave the loss: a step counts exactly the targets that are not masked, and masking the
// first half of each row changes the loss.
TEST(LoraTraining, PromptMaskingChangesWhichTokensCount) {
  TempDir dir;
  Config c = lora_run(dir, 1);
  const size_t n = static_cast<size_t>(c.train.batch_size) * c.train.seq_len;
  std::vector<int32_t> inputs(n), targets(n);
  for (size_t i = 0; i < n; ++i) inputs[i] = static_cast<int32_t>(i % 13), targets[i] = static_cast<int32_t>((i + 1) % 13);
  std::vector<int32_t> masked = targets;
  int64_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % static_cast<size_t>(c.train.seq_len) < 6) masked[i] = -1;
    kept += masked[i] != -1;
  }
  Trainer a(c, config_to_yaml(c));
  c.log.run_dir = dir.file("run_masked");
  Trainer b(c, config_to_yaml(c));
  const StepResult all = a.train_step(inputs, targets), some = b.train_step(inputs, masked);
  EXPECT_EQ(all.target_tokens, static_cast<int64_t>(n));
  EXPECT_EQ(some.target_tokens, kept);
  EXPECT_EQ(kept, static_cast<int64_t>(n) - 6 * c.train.batch_size);
  EXPECT_NE(all.loss, some.loss);
}

// export --merge writes base + (alpha/rank) B A as an llm.c file; --adapters writes PEFT's names, shapes and
// config; a checkpoint of a LoRA run needs one of the two.
TEST(LoraExport, MergeAndPeftAdapters) {
  TempDir dir;
  Config c = lora_run(dir, 3);
  std::vector<float> expected;
  {
    Trainer t(c, config_to_yaml(c));
    t.run();
    expected = merged_parameters(t.model().base_to_host(), t.model());
  }
  ASSERT_EQ(run_export_command({c.log.run_dir, "--merge", "--format", "llmc", "--out", dir.file("merged")}), 0);
  EXPECT_EQ(read_llmc_parameters(dir.file("merged/model.bin"), llmc_header_of(c.model)), expected);

  ASSERT_EQ(run_export_command({c.log.run_dir, "--merge", "--format", "hf", "--out", dir.file("merged_hf")}), 0);
  EXPECT_EQ(load_hf_gpt2(dir.file("merged_hf"), c.model), expected);
  // gpt-train sample on a LoRA checkpoint samples the merged weights.
  const std::string sample = std::string(GPT_TRAIN_EXE) + " sample '" + c.log.run_dir + "' --max-tokens 4 > '" +
                             dir.file("sample.txt") + "' 2>&1";
  EXPECT_EQ(std::system(sample.c_str()), 0) << read_file_bytes(dir.file("sample.txt"));

  ASSERT_EQ(run_export_command({c.log.run_dir, "--adapters", "--out", dir.file("peft")}), 0);
  const SafetensorsReader peft(dir.file("peft/adapter_model.safetensors"));
  EXPECT_EQ(peft.header().tensors.size(), 2u * 4u * static_cast<size_t>(c.model.n_layer));
  const SafetensorsEntry* a = peft.header().find("base_model.model.transformer.h.1.attn.c_attn.lora_A.weight");
  const SafetensorsEntry* b = peft.header().find("base_model.model.transformer.h.1.mlp.c_proj.lora_B.weight");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{4, c.model.n_embd}));
  EXPECT_EQ(b->shape, (std::vector<int64_t>{c.model.n_embd, 4}));
  const auto config = nlohmann::json::parse(read_file_bytes(dir.file("peft/adapter_config.json")));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 8.0);
  EXPECT_EQ(config["fan_in_fan_out"], true);
  EXPECT_EQ(config["target_modules"], nlohmann::json({"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"}));

  const std::string message = error_message([&] { run_export_command({c.log.run_dir, "--out", dir.file("x")}); });
  EXPECT_NE(message.find("holds LoRA adapters: give --merge"), std::string::npos) << message;
}

}  // namespace
}  // namespace gpt::test

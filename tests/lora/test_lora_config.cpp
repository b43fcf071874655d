// finetune.lora's keys: read from nested YAML, bad values named with their line; and the 8 GB recipe, end to
// end on the CPU on a small model with the project's own demo instructions.
#include "config/config_loader.h"
#include "io/durable_file.h"
#include "memory/plan_report.h"
#include "train/trainer.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace gpt::test {
namespace {

std::string load_error(const std::string& yaml) {
  return error_message([&] { load_config_from_string(yaml, {}, "config.yaml"); });
}

TEST(LoraConfig, NestedKeysReadAndBadValuesNameTheLine) {
  const Config c = load_config_from_string(
      "finetune:\n  lora:\n    rank: 8\n    alpha: 16\n    dropout: 0.05\n    targets: [qkv, fc]\n", {}, "config.yaml");
  EXPECT_EQ(c.finetune.lora_rank, 8);
  EXPECT_DOUBLE_EQ(c.finetune.lora_alpha, 16.0);
  EXPECT_DOUBLE_EQ(c.finetune.lora_dropout, 0.05);
  EXPECT_EQ(c.finetune.lora_targets, (std::vector<std::string>{"qkv", "fc"}));
  EXPECT_FALSE(Config().finetune.lora());

  std::string m = load_error("finetune:\n  lora:\n    rank: -2\n");
  EXPECT_NE(m.find("config.yaml:3: finetune.lora.rank: -2 is too small"), std::string::npos) << m;
  m = load_error("finetune:\n  lora:\n    rank: 4\n    targets: [qkv, mlp]\n");
  EXPECT_NE(m.find("config.yaml:4: finetune.lora.targets: 'mlp' is not allowed"), std::string::npos) << m;
  m = load_error("finetune:\n  lora:\n    rank: 4\n\n    dropout: 1.5\n");
  EXPECT_NE(m.find("config.yaml:5: finetune.lora.dropout: 1.5 is outside [0, 1)"), std::string::npos) << m;
  m = load_error("finetune:\n  lora:\n    rank: 4\n    targets: []\n");
  EXPECT_NE(m.find("config.yaml:4: finetune.lora.targets: is empty"), std::string::npos) << m;
  m = load_error("model:\n  n_embd: 8\n  n_head: 2\nfinetune:\n  lora:\n    rank: 9\n");
  EXPECT_NE(m.find("config.yaml:6: finetune.lora.rank: 9 exceeds model.n_embd = 8"), std::string::npos) << m;
  m = load_error("precision:\n  recipe: fp8\nfinetune:\n  lora:\n    rank: 4\n");
  EXPECT_NE(m.find("LoRA with precision.recipe fp8 (config.yaml:2) is not supported"), std::string::npos) << m;
}

// configs/finetune-gpt2-8gb.yaml as a user runs it, shrunk to a model the CPU trains in seconds (the byte
// tokenizer, no Hugging Face base, T 64): scripts/make_finetune_demo.sh writes and prepares its data, the
// planner's report shows LoRA against full fine-tuning, and a few steps train and checkpoint.
TEST(LoraRecipe, EightGigabyteRecipeRunsEndToEndOnASmallModel) {
  TempDir dir;
  const std::string data = dir.file("demo");
  const std::string command = "EXAMPLES=300 GPT_TRAIN='" + std::string(GPT_TRAIN_EXE) + "' bash '" +
                              std::string(GPT_SOURCE_DIR) + "/scripts/make_finetune_demo.sh' '" + data +
                              "' byte > '" + dir.file("prepare.log") + "' 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read_file_bytes(dir.file("prepare.log"));
  const std::vector<std::string> overrides = {
      "model.init_from=\"\"", "model.vocab_size=256", "model.vocab_pad_multiple=64", "model.context_length=64",
      "model.n_layer=2", "model.n_head=2", "model.n_embd=32", "data.tokenizer=byte",
      "data.train=" + data + "/train_*.bin", "data.val=" + data + "/val_*.bin", "train.backend=cpu",
      "train.seq_len=64", "train.batch_size=2", "train.grad_accum_steps=2", "train.steps=4", "train.eval_every=4",
      "train.eval_batches=2", "train.sample_every=0", "checkpoint.every=2", "memory.budget=",
      "log.run_dir=" + dir.file("run")};
  Config c = load_config(std::string(GPT_SOURCE_DIR) + "/configs/finetune-gpt2-8gb.yaml", overrides);
  ASSERT_TRUE(c.finetune.lora());
  const std::string plan = plan_report(c, std::nullopt, {});
  EXPECT_NE(plan.find("against full fine-tuning"), std::string::npos) << plan;
  Trainer trainer(c, config_to_yaml(c));
  const TrainSummary summary = trainer.run();
  EXPECT_EQ(summary.steps_done, 4);
  EXPECT_TRUE(std::isfinite(summary.last_loss));
  ASSERT_TRUE(summary.last_val_loss.has_value());
  EXPECT_TRUE(std::filesystem::exists(dir.file("run/checkpoints/step_00000004/adapters.safetensors")));
}

}  // namespace
}  // namespace gpt::test

// gpt-train export on a real run directory, and model.init_from on what it wrote.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "config/config_loader.h"
#include "io/checkpoint.h"
#include "io/hf_gpt2.h"
#include "io/llmc_model_file.h"
#include "train/synthetic_run.h"
#include "train/trainer.h"

namespace gpt::test {
namespace {

namespace fs = std::filesystem;

int run(const std::string& args) {
  return std::system((std::string(GPT_TRAIN_EXE) + " " + args + " > /dev/null 2>&1").c_str());
}

TEST(ExportCommand, WritesWhatInitFromAndLlmcReadBack) {
  TempDir dir;
  Config c = synthetic_run(dir, permutation_pattern(), 4096, false);
  c.train.steps = 2;
  Trainer(c, config_to_yaml(c)).run();
  const std::string checkpoint = *latest_checkpoint(c.log.run_dir);
  const std::string model_bin = checkpoint + "/model.bin";
  const LlmcModelHeader header = read_llmc_header(model_bin);
  const std::vector<float> trained = read_llmc_parameters(model_bin, header);

  ASSERT_EQ(run("export " + c.log.run_dir + " --format hf --out " + dir.file("hf")), 0);
  EXPECT_TRUE(fs::exists(dir.file("hf/config.json")));
  EXPECT_EQ(load_hf_gpt2(dir.file("hf"), c.model), trained);
  ASSERT_EQ(run("export " + c.log.run_dir + " --format llmc --out " + dir.file("llmc")), 0);
  const std::vector<float> llmc = read_llmc_parameters(dir.file("llmc/model.bin"), header);
  EXPECT_EQ(llmc, trained);
  EXPECT_NE(run("export " + c.log.run_dir + " --format onnx --out " + dir.file("x")), 0);

  // A run started from the export begins from the trained weights: its step-0 checkpoint would hold them,
  // so compare the first step's loss with a run started from the llm.c file.
  Config from_hf = c, from_llmc = c;
  from_hf.model.init_from = dir.file("hf");
  from_hf.log.run_dir = dir.file("run_hf");
  from_hf.train.steps = 1;
  from_llmc.model.init_from = dir.file("llmc/model.bin");
  from_llmc.log.run_dir = dir.file("run_llmc");
  from_llmc.train.steps = 1;
  Trainer(from_hf, config_to_yaml(from_hf)).run();
  Trainer(from_llmc, config_to_yaml(from_llmc)).run();
  const auto a = logged_losses(from_hf.log.run_dir), b = logged_losses(from_llmc.log.run_dir);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace gpt::test

// The data-parallel keys: dist.* validation, and train.global_batch_tokens, from which the trainer derives
// the accumulation steps (on one rank here; tests/dist/test_mpirun.cpp does it on two).
#include "config/config_loader.h"
#include "data/shard.h"
#include "test_util.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

std::string load_error(const std::vector<std::string>& overrides) {
  try {
    load_config_from_string("train:\n  batch_size: 4\n  seq_len: 16\n", overrides, "config.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DistConfig, InvalidValuesAreNamed) {
  EXPECT_EQ(load_error({"dist.zero=1", "dist.timeout_s=30"}), "");
  EXPECT_NE(load_error({"dist.zero=2"}).find("dist.zero: stage 2 is not implemented; use 0"), std::string::npos)
      << load_error({"dist.zero=2"});
  EXPECT_NE(load_error({"dist.timeout_s=0"}).find("dist.timeout_s"), std::string::npos);
  EXPECT_EQ(load_error({"dist.reduce_dtype=bf16"}), "");
  EXPECT_NE(load_error({"dist.reduce_dtype=fp16"}).find("dist.reduce_dtype"), std::string::npos);
  const std::string zero_bf16 = load_error({"dist.reduce_dtype=bf16", "dist.zero=1"});
  EXPECT_NE(zero_bf16.find("dist.reduce_dtype: bf16 with dist.zero 1 is not supported"), std::string::npos) << zero_bf16;
  EXPECT_EQ(load_error({"train.global_batch_tokens=192"}), "");
  const std::string odd = load_error({"train.global_batch_tokens=100"});
  EXPECT_NE(odd.find("train.global_batch_tokens: 100 is not a multiple of train.batch_size x train.seq_len = 4 x 16 = 64"),
            std::string::npos)
      << odd;
}

TEST(DistConfig, GlobalBatchTokensDerivesTheAccumulationSteps) {
  TempDir dir;
  write_shard(dir.file("train_000000.bin"), std::vector<uint16_t>(5000, 3));
  Config c;
  c.model = tiny_model(16, 1, 16, 2, 16);
  c.data.train = dir.file("train_*.bin");
  c.data.val = "";
  c.train.batch_size = 4;
  c.train.seq_len = 16;
  c.train.global_batch_tokens = 3 * 4 * 16;
  c.train.grad_accum_steps = 5;  // replaced, with a warning
  c.log.run_dir = dir.file("run");
  Trainer trainer(c, config_to_yaml(c));
  EXPECT_EQ(trainer.config().train.grad_accum_steps, 3);
}

}  // namespace
}  // namespace gpt::test

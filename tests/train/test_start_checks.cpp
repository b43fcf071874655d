// What the trainer checks before it allocates or trains: shards that exist, and memory that the machine has.
#include "config/config_loader.h"
#include "synthetic_run.h"
#include "train/data_check.h"
#include "train/memory_check.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

TEST(StartChecks, AGlobMatchingNothingNamesItsKeyTheFolderAndTheFix) {
  TempDir dir;
  Config c = synthetic_run(dir, permutation_pattern(), 4000, true);
  c.data.val = dir.file("nowhere/val_*.bin");
  const std::string message = error_message([&] { Trainer t(c, config_to_yaml(c)); });
  EXPECT_NE(message.find("data.val: no file matches '" + c.data.val + "' (searched '" + dir.file("nowhere") +
                         "', which does not exist)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("gpt-train prepare --input FILE.txt --out " + dir.file("nowhere")), std::string::npos)
      << message;
  const std::string relative = error_message([] { require_shards("data.train", "data/none_here/train_*.bin"); });
  EXPECT_NE(relative.find("relative to the working directory " + std::filesystem::current_path().string()),
            std::string::npos)
      << relative;
}

TEST(StartChecks, ARunLargerThanTheMachineIsRefusedByComponentBeforeAllocating) {
  TempDir dir;
  Config c = synthetic_run(dir, permutation_pattern(), 4000, false);
  c.model.n_layer = 100000;
  c.model.n_embd = 768;
  c.model.n_head = 12;
  const std::string message = error_message([&] { Trainer t(c, config_to_yaml(c)); });
  for (const char* part : {"the run needs ", "(parameters ", "gradients ", "AdamW ", "activations ",
                           "this machine has available (", "recompute.mode: full"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;

  MemoryLedger ledger;
  ledger.parameters = 3u << 20;
  ledger.optimizer = 6u << 20;
  check_fits_host_memory(ledger, {64u << 20, 32u << 20}, true);
  EXPECT_NE(error_message([&] { check_fits_host_memory(ledger, {64u << 20, 8u << 20}, true); })
                .find("the run needs 9.0 MiB (parameters 3.0 MiB, gradients 0 B, AdamW 6.0 MiB"),
            std::string::npos);
}

}  // namespace
}  // namespace gpt::test

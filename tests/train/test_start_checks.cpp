// What the trainer checks before it allocates or trains: shards that exist, and memory that the machine has.
#include "config/config_loader.h"
#include "cpu/gradcheck.h"
#include "synthetic_run.h"
#include "train/data_check.h"
#include "train/memory_check.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <vector>

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

// The ranks on one node share its memory: the check adds their ledgers (each its own rank's: under ZeRO-1 its
// shard, data_parallel_ledger), so two ranks that would each fit alone are refused together.
TEST(StartChecks, TheRanksOfANodeAreCheckedTogetherAgainstItsMemory) {
  MemoryLedger shard;
  shard.parameters = 1u << 20;
  shard.host_parameters = 2u << 20;
  shard.host_gradients = 2u << 20;
  shard.host_optimizer = 4u << 20;
  const std::vector<MemoryLedger> node = {shard, shard};
  check_fits_host_memory(shard, {64u << 20, 10u << 20}, false);
  check_fits_host_memory(node, {64u << 20, 16u << 20}, false);
  const std::string message = error_message([&] { check_fits_host_memory(node, {64u << 20, 10u << 20}, false); });
  for (const char* part : {"the 2 ranks on this node need 16.0 MiB of host memory", "FP32 masters 4.0 MiB",
                           "AdamW 8.0 MiB, over its ranks", "spread the ranks over more nodes"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  // Where device memory is the host's, each rank's device column is in it too.
  check_fits_host_memory(node, {64u << 20, 18u << 20}, true);
  EXPECT_NE(error_message([&] { check_fits_host_memory(node, {64u << 20, 17u << 20}, true); })
                .find("the 2 ranks on this node need 18.0 MiB (parameters 2.0 MiB"),
            std::string::npos);
}

// memory.budget: a size, auto (on the CPU the host's available memory, shared by the node's ranks, less
// its margin), or an error that names the key and says what to write.
TEST(StartChecks, AMemoryBudgetIsASizeOrAutoAndNothingElse) {
  EXPECT_FALSE(resolve_memory_budget("", cpu_backend(), "memory.budget").has_value());
  EXPECT_EQ(resolve_memory_budget("512MiB", cpu_backend(), "memory.budget"), std::optional<uint64_t>(512u << 20));
  const std::optional<HostMemory> host = host_memory();
  ASSERT_TRUE(host.has_value());
  const std::optional<uint64_t> all = resolve_memory_budget("auto", cpu_backend(), "memory.budget");
  const std::optional<uint64_t> half = resolve_memory_budget("auto", cpu_backend(), "memory.budget", 2);
  ASSERT_TRUE(all && half);
  // MemAvailable moves between the reads; the margin is 5%, at most 512 MiB.
  EXPECT_LE(*all, host->total);
  EXPECT_GE(*all, host->available / 2);
  EXPECT_LT(*half, *all);
  const std::string message = error_message([&] { resolve_memory_budget("lots", cpu_backend(), "--budget"); });
  EXPECT_NE(message.find("--budget: 'lots' is not a size; write e.g. 8GiB or 512MiB, or auto"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace gpt::test

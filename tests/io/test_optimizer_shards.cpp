// ZeRO-1 optimizer shards in a checkpoint: written by each rank for the ranges it owns, read back by any
// layout of ranges (one optimizer owning everything, or other shards), and from a whole optimizer.bin.
#include "io/optimizer_shards.h"

#include "core/random.h"
#include "io/checkpoint.h"
#include "model/gpt.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

namespace fs = std::filesystem;

namespace gpt::test {
namespace {

struct ShardSetup {
  ShardSetup() : backend(make_backend(BackendKind::Cpu, {1})), model(tiny_model(16, 2, 16, 2, 8), 2, 8, *backend) {
    model.init_weights(1);
    const ParameterLayout& layout = model.parameter_layout();
    // Rank 0 owns the first 40% of every tensor, rank 1 the rest, as uneven as real ZeRO chunks.
    for (size_t i = 0; i < layout.specs().size(); ++i) {
      const auto n = static_cast<int64_t>(layout.arena_layout().buffer(i).bytes / 4);
      const int64_t cut = n * 2 / 5;
      ranges[0].push_back({i, 0, cut});
      ranges[1].push_back({i, cut, n - cut});
    }
  }
  // A whole optimizer whose moments are distinct values, and the shards holding the same moments.
  std::vector<float> fill(AdamW& whole, int64_t steps) {
    std::vector<float> state(2 * static_cast<size_t>(whole.num_elements()));
    for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<float>(i) * 0.25f + 1.0f;
    whole.state_from_host(state, steps);
    return state;
  }
  std::unique_ptr<Backend> backend;
  GPT model;
  std::vector<ParamRange> ranges[2];
};

// The moments of `ranges` cut out of a whole optimizer's state (m then v, each in layout order).
std::vector<float> cut(const std::vector<float>& whole, const ParameterLayout& layout, const std::vector<ParamRange>& ranges) {
  std::vector<int64_t> starts;
  int64_t n = 0;
  for (const ArenaBuffer& b : layout.arena_layout().buffers()) starts.push_back(std::exchange(n, n + static_cast<int64_t>(b.bytes / 4)));
  std::vector<float> out;
  for (int moment = 0; moment < 2; ++moment)
    for (const ParamRange& r : ranges)
      for (int64_t i = 0; i < r.count; ++i) out.push_back(whole[static_cast<size_t>(moment * n + starts[r.tensor] + r.offset + i)]);
  return out;
}

TEST(OptimizerShards, ShardsOfTwoRanksReadBackWholeAndReshardedAsOneRankOrThree) {
  ShardSetup s;
  TempDir dir;
  const ParameterLayout& layout = s.model.parameter_layout();
  AdamW whole(OptimConfig{}, layout, *s.backend);
  const std::vector<float> state = s.fill(whole, 7);
  for (int r = 0; r < 2; ++r) {
    AdamW shard(OptimConfig{}, layout, *s.backend, s.ranges[r]);
    shard.state_from_host(cut(state, layout, s.ranges[r]), 7);
    EXPECT_EQ(write_optimizer_shard(dir.path().string(), shard, layout, r, 2), optimizer_shard_name(r, 2));
  }
  EXPECT_TRUE(is_optimizer_shard_name("optimizer.rank00001-of-00002.bin"));
  EXPECT_FALSE(is_optimizer_shard_name("optimizer.bin"));

  AdamW back(OptimConfig{}, layout, *s.backend);
  EXPECT_EQ(read_optimizer_state(dir.path().string(), back, layout), 7);
  EXPECT_EQ(back.state_to_host(), state);

  // Three ranks now: thirds that cut across the old shards' boundaries.
  for (int r = 0; r < 3; ++r) {
    std::vector<ParamRange> thirds;
    for (size_t i = 0; i < layout.specs().size(); ++i) {
      const auto n = static_cast<int64_t>(layout.arena_layout().buffer(i).bytes / 4);
      thirds.push_back({i, n * r / 3, n * (r + 1) / 3 - n * r / 3});
    }
    AdamW third(OptimConfig{}, layout, *s.backend, thirds);
    EXPECT_EQ(read_optimizer_state(dir.path().string(), third, layout), 7);
    EXPECT_EQ(third.state_to_host(), cut(state, layout, thirds)) << "rank " << r << " of 3";
  }

  fs::remove(dir.path() / optimizer_shard_name(1, 2));
  const std::string message = error_message([&] { read_optimizer_state(dir.path().string(), back, layout); });
  EXPECT_NE(message.find("one of 2 optimizer shards"), std::string::npos) << message;
}

TEST(OptimizerShards, AWholeCheckpointReadsIntoAShard) {
  ShardSetup s;
  TempDir dir;
  const ParameterLayout& layout = s.model.parameter_layout();
  AdamW whole(OptimConfig{}, layout, *s.backend);
  const std::vector<float> state = s.fill(whole, 4);
  CheckpointState cs;
  cs.step = 4;
  const std::string ckpt = save_checkpoint(dir.file("run"), cs, s.model, whole, "x: 1\n");
  AdamW shard(OptimConfig{}, layout, *s.backend, s.ranges[1]);
  EXPECT_EQ(read_optimizer_state(ckpt, shard, layout), 4);
  EXPECT_EQ(shard.state_to_host(), cut(state, layout, s.ranges[1]));
  // And load_checkpoint does the same for a sharded optimizer.
  AdamW other(OptimConfig{}, layout, *s.backend, s.ranges[0]);
  load_checkpoint(ckpt, s.model, other);
  EXPECT_EQ(other.state_to_host(), cut(state, layout, s.ranges[0]));
}

// save_checkpoint with a shard writer (what the trainer passes under ZeRO-1; here one process plays both
// ranks): the shards join the manifest in place of optimizer.bin, and the checkpoint verifies and loads.
TEST(OptimizerShards, ACheckpointWithShardsVerifiesAndLoads) {
  ShardSetup s;
  TempDir dir;
  const ParameterLayout& layout = s.model.parameter_layout();
  AdamW whole(OptimConfig{}, layout, *s.backend);
  const std::vector<float> state = s.fill(whole, 2);
  std::vector<std::unique_ptr<AdamW>> shards;
  for (int r = 0; r < 2; ++r) {
    shards.push_back(std::make_unique<AdamW>(OptimConfig{}, layout, *s.backend, s.ranges[r]));
    shards.back()->state_from_host(cut(state, layout, s.ranges[r]), 2);
  }
  CheckpointState cs;
  cs.step = 2;
  std::string staging_seen;
  const std::string ckpt = save_checkpoint(dir.file("run"), cs, s.model, *shards[0], "x: 1\n", [&](const std::string& staging) {
    staging_seen = staging;
    std::vector<std::string> names;
    for (int r = 0; r < 2; ++r) names.push_back(write_optimizer_shard(staging, *shards[r], layout, r, 2));
    return names;
  });
  EXPECT_EQ(staging_seen, checkpoint_staging_dir(dir.file("run"), 2));
  EXPECT_FALSE(fs::exists(fs::path(ckpt) / "optimizer.bin"));
  EXPECT_TRUE(verify_checkpoint(ckpt).empty());
  AdamW back(OptimConfig{}, layout, *s.backend);
  load_checkpoint(ckpt, s.model, back);
  EXPECT_EQ(back.state_to_host(), state);
  EXPECT_EQ(back.step_count(), 2);
}

// Overwrites bytes of a file in place, as damage or a hostile writer would.
template <class T>
void poke(const fs::path& path, std::streamoff offset, T value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(reinterpret_cast<const char*>(&value), sizeof(value));
  ASSERT_TRUE(f.good()) << path;
}

// Every count an optimizer file's header or range table claims is checked against the file's size before
// anything is allocated from it: a range count of 2^31 - 1 used to allocate a 32 GiB table.
TEST(OptimizerShards, HostileCountsAreCheckedAgainstTheFileSize) {
  ShardSetup s;
  TempDir dir;
  const ParameterLayout& layout = s.model.parameter_layout();
  AdamW whole(OptimConfig{}, layout, *s.backend);
  const std::vector<float> state = s.fill(whole, 3);
  for (int r = 0; r < 2; ++r) {
    AdamW shard(OptimConfig{}, layout, *s.backend, s.ranges[r]);
    shard.state_from_host(cut(state, layout, s.ranges[r]), 3);
    write_optimizer_shard(dir.path().string(), shard, layout, r, 2);
  }
  const fs::path rank0 = dir.path() / optimizer_shard_name(0, 2);
  const auto bytes = fs::file_size(rank0);
  AdamW back(OptimConfig{}, layout, *s.backend);
  auto message = [&] { return error_message([&] { read_optimizer_state(dir.path().string(), back, layout); }); };

  EXPECT_EQ(check_optimizer_shard(BinaryFile::open(rank0.string(), "optimizer shard"), layout.num_parameters()), 2);
  poke<int32_t>(rank0, 4 * 4, std::numeric_limits<int32_t>::max());  // the number of ranges
  std::string m = message();
  EXPECT_NE(m.find("optimizer shard " + rank0.string() + ": its header claims the 1024-byte header and a table of "
                   "2147483647 ranges of 16 bytes, 34359739376 bytes in all, but the file holds " +
                   std::to_string(bytes) + " bytes"),
            std::string::npos)
      << m;

  poke<int32_t>(rank0, 4 * 4, static_cast<int32_t>(s.ranges[0].size()));
  poke<int64_t>(rank0, 1024 + 8, std::numeric_limits<int64_t>::max());  // the first range's count
  m = message();
  EXPECT_NE(m.find("range 0 (table entry at byte offset 1024) is [0, 0 + 9223372036854775807), outside the " +
                   std::to_string(layout.num_parameters()) + " parameters"),
            std::string::npos)
      << m;

  poke<int64_t>(rank0, 1024 + 8, s.ranges[0][0].count);
  fs::resize_file(rank0, bytes - 4);
  m = message();
  EXPECT_NE(m.find("bytes in all, but the file holds " + std::to_string(bytes - 4) + " bytes (4 bytes missing"),
            std::string::npos)
      << m;
  fs::resize_file(rank0, bytes);
  poke<float>(rank0, static_cast<std::streamoff>(bytes - 4), state.back());
  EXPECT_EQ(read_optimizer_state(dir.path().string(), back, layout), 3);

  // optimizer.bin, read by a whole optimizer (load_checkpoint) and by a shard (read_optimizer_state).
  CheckpointState cs;
  cs.step = 3;
  const std::string ckpt = save_checkpoint(dir.file("run"), cs, s.model, whole, "x: 1\n");
  const fs::path bin = fs::path(ckpt) / "optimizer.bin";
  const auto n = static_cast<uint64_t>(layout.num_parameters());
  poke<uint32_t>(bin, 2 * 4, static_cast<uint32_t>(n + 1000));  // num_elements, low word
  const std::string want = "optimizer state " + bin.string() + ": its header claims the 1024-byte header and m and "
                           "v (fp32) of " + std::to_string(n + 1000) + " parameters, " +
                           std::to_string(1024 + 8 * (n + 1000)) + " bytes in all, but the file holds " +
                           std::to_string(1024 + 8 * n) + " bytes (8000 bytes missing";
  m = error_message([&] { load_checkpoint(ckpt, s.model, whole, /*verify=*/false); });
  EXPECT_NE(m.find(want), std::string::npos) << m;
  AdamW shard(OptimConfig{}, layout, *s.backend, s.ranges[1]);
  m = error_message([&] { read_optimizer_state(ckpt, shard, layout); });
  EXPECT_NE(m.find(want), std::string::npos) << m;
}

}  // namespace
}  // namespace gpt::test

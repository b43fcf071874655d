// The table of memory levers (`gpt-train plan --levers`) against the ledger: each row's numbers equal the ledger
// of the config that lever means, written out here by hand rather than by the lever's own transform; ZeRO-1 rows
// equal what DataParallel and AdamW allocate on each rank; the JSON and the text carry the same numbers.
#include "memory/levers.h"
#include "memory/levers_report.h"
#include "memory/planner.h"

#include "config/config_loader.h"
#include "cpu/cpu_backend.h"
#include "dist/data_parallel.h"
#include "model/gpt.h"
#include "optim/adamw.h"

#include "command_util.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace gpt::test {
namespace {

// Widths that are no multiple of 64 (C = 40, vocabulary 67 padded to 72), so ZeRO-1's bucket padding shows.
Config lever_config() {
  Config c;
  c.model = tiny_model(67, 3, 40, 4, 32);
  c.train.batch_size = 4;
  c.train.seq_len = 32;
  c.train.grad_accum_steps = 2;
  c.precision.recipe = "bf16";
  c.recompute.mode = "selective";
  c.recompute.ops = {"gelu"};
  return c;
}

// A backend with a workspace, so the "other" column and the narrow recipes' extra workspace are exercised.
BackendCapabilities capabilities() {
  BackendCapabilities caps;
  caps.reserved_device_bytes = 3 << 20;
  caps.narrow_matmul_workspace_bytes = 1 << 20;
  return caps;
}

MemoryLedger ledger_of(const Config& c) {
  return ledger_for(c, resolve_recompute(c.recompute, c.model.n_layer), c.train.batch_size, capabilities());
}

void expect_same_ledger(const MemoryLedger& got, const MemoryLedger& want, const std::string& row) {
  SCOPED_TRACE(row);
  EXPECT_EQ(got.parameters, want.parameters);
  EXPECT_EQ(got.master_staging, want.master_staging);
  EXPECT_EQ(got.host_compute_weights, want.host_compute_weights);
  EXPECT_EQ(got.frozen_weights, want.frozen_weights);
  EXPECT_EQ(got.adapter_scratch, want.adapter_scratch);
  EXPECT_EQ(got.compute_weights, want.compute_weights);
  EXPECT_EQ(got.gradients, want.gradients);
  EXPECT_EQ(got.optimizer, want.optimizer);
  for (int u = 0; u < kActivationUses; ++u) EXPECT_EQ(got.activation[u], want.activation[u]) << "activation use " << u;
  EXPECT_EQ(got.communication, want.communication);
  EXPECT_EQ(got.fp8_state, want.fp8_state);
  EXPECT_EQ(got.backend_workspace, want.backend_workspace);
  EXPECT_EQ(got.host_parameters, want.host_parameters);
  EXPECT_EQ(got.host_gradients, want.host_gradients);
  EXPECT_EQ(got.host_optimizer, want.host_optimizer);
  EXPECT_EQ(got.total(), want.total());
}

const LeverRow& row_named(const LeverTable& table, const std::string& name) {
  for (const LeverRow& r : table.rows)
    if (r.name == name) return r;
  throw Error("no lever row '" + name + "'");
}

// A world of `ranks` as seen by rank `rank`, enough to lay out DataParallel's buffers; no collective runs.
class LayoutOnlyCommunicator : public Communicator {
 public:
  LayoutOnlyCommunicator(int rank, int ranks) : rank_(rank), ranks_(ranks) {}
  std::string name() const override { return "layout-only"; }
  int rank() const override { return rank_; }
  int world_size() const override { return ranks_; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return ranks_; }
  std::vector<int> node_ranks() const override {
    std::vector<int> all(static_cast<size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r) all[static_cast<size_t>(r)] = r;
    return all;
  }
  CommHandle all_reduce_sum_async(const Tensor&, CommStream) override { GPT_FAIL("layout-only communicator"); }
  CommHandle reduce_scatter_sum_async(const Tensor&, const Tensor&, CommStream) override {
    GPT_FAIL("layout-only communicator");
  }
  CommHandle all_gather_async(const Tensor&, const Tensor&, CommStream) override { GPT_FAIL("layout-only communicator"); }
  CommHandle all_reduce_max_async(const Tensor&, CommStream) override { GPT_FAIL("layout-only communicator"); }
  CommHandle broadcast_async(const Tensor&, int, CommStream) override { GPT_FAIL("layout-only communicator"); }
  CommHandle barrier_async() override { GPT_FAIL("layout-only communicator"); }

 private:
  int rank_, ranks_;
};

// What DataParallel and AdamW allocate under data parallelism, the largest AdamW state over the ranks.
DataParallelMemory allocated(const Config& c, int ranks, int zero_stage) {
  cpu::CpuBackend backend(1);
  GPT model(c.model, 1, c.train.seq_len, backend);
  DataParallelMemory out;
  for (int r = 0; r < ranks; ++r) {
    LayoutOnlyCommunicator comm(r, ranks);
    DataParallel dp(model, comm, zero_stage);
    AdamW adamw(c.optim, model.parameter_layout(), backend, dp.optimizer_ranges());
    out.optimizer = std::max<uint64_t>(out.optimizer, adamw.state_bytes());
    if (r == 0) out.communication = dp.buffer_bytes(), out.bytes_sent_per_step = dp.bytes_sent_per_step();
    EXPECT_EQ(dp.buffer_bytes(), out.communication) << "rank " << r;
  }
  return out;
}

TEST(Levers, EachRowIsTheLedgerOfItsLeversConfig) {
  Config c = lever_config();
  c.finetune.lora_rank = 4;
  c.finetune.lora_targets = {"qkv", "fc"};
  const uint64_t budget = 5 << 20;
  const LeverTable table = lever_table(c, budget, capabilities());

  Config base = c;
  base.precision.recipe = "fp32";
  base.recompute = RecomputeConfig{};
  base.finetune.lora_rank = 0;
  const auto with = [&](const std::function<void(Config&)>& change) {
    Config v = base;
    change(v);
    return v;
  };
  const auto recompute = [](Config& v, const std::string& mode, std::vector<std::string> ops, const std::string& every) {
    v.recompute.mode = mode;
    v.recompute.ops = std::move(ops);
    v.recompute.every = every;
  };
  const auto narrow = [](Config& v) { v.precision.recipe = "bf16", v.precision.grad_dtype = "bf16"; };
  const auto micro = [](Config& v, int b) { v.train.grad_accum_steps = 8 / b, v.train.batch_size = b; };
  std::map<std::string, Config> want = {
      {"configured", c},
      {"FP32 baseline", base},
      {"bf16", with([](Config& v) { v.precision.recipe = "bf16"; })},
      {"fp8", with([](Config& v) { v.precision.recipe = "fp8"; })},
      {"bf16, grad_dtype bf16", with(narrow)},
      {"accumulation x2", with([&](Config& v) { micro(v, 4); })},
      {"accumulation x4", with([&](Config& v) { micro(v, 2); })},
      {"accumulation x8", with([&](Config& v) { micro(v, 1); })},
      {"selective [attention]", with([&](Config& v) { recompute(v, "selective", {"attention"}, "1"); })},
      {"selective [gelu]", with([&](Config& v) { recompute(v, "selective", {"gelu"}, "1"); })},
      {"selective [layernorm]", with([&](Config& v) { recompute(v, "selective", {"layernorm"}, "1"); })},
      {"selective [attention,gelu,layernorm]",
       with([&](Config& v) { recompute(v, "selective", {"attention", "gelu", "layernorm"}, "1"); })},
      {"full every 1", with([&](Config& v) { recompute(v, "full", {}, "1"); })},
      {"full every 2", with([&](Config& v) { recompute(v, "full", {}, "2"); })},  // round(sqrt(3))
      {"LoRA rank 4, qkv,fc", with([&](Config& v) { v.finetune = c.finetune; })},
      {"+ accumulation to micro-batch 1", with([&](Config& v) { narrow(v), micro(v, 1); })},
      {"+ full every 2", with([&](Config& v) { narrow(v), micro(v, 1), recompute(v, "full", {}, "2"); })},
      {"optimizer offload", with([](Config& v) { v.memory.offload = "optimizer"; })},
      {"+ optimizer offload", with([&](Config& v) {
         narrow(v), micro(v, 1), recompute(v, "full", {}, "2");
         v.memory.offload = "optimizer";
       })},
  };
  // Data parallel rows: the single-rank ledger of the same config, with the state and buffers one rank holds.
  struct Sharded {
    Config config;
    int ranks, zero;
  };
  std::map<std::string, Sharded> sharded = {
      {"data parallel on 8 ranks, no ZeRO", {base, 8, 0}},
      {"ZeRO-1 on 2 ranks", {base, 2, 1}},
      {"ZeRO-1 on 4 ranks", {base, 4, 1}},
      {"ZeRO-1 on 8 ranks", {base, 8, 1}},
  };
  Config planned = c;
  const MemoryChoice choice = choose_memory_plan(planned, budget, capabilities());

  for (const LeverRow& row : table.rows) {
    SCOPED_TRACE(row.name);
    EXPECT_TRUE(row.not_applicable.empty()) << row.not_applicable;
    EXPECT_EQ(row.params() + row.ledger.gradients + row.ledger.optimizer + row.ledger.activations() + row.other(),
              row.ledger.total());
    if (row.family == "planner") {
      EXPECT_EQ(row.name, "memory.budget " + format_bytes(budget));
      expect_same_ledger(row.ledger, choice.ledger, row.name);
      EXPECT_EQ(row.variant.config.train.batch_size, choice.batch_size);
      continue;
    }
    if (const auto w = want.find(row.name); w != want.end()) {
      expect_same_ledger(row.ledger, ledger_of(w->second), row.name);
      EXPECT_EQ(row.bytes_sent_per_step, 0.0);
      // Offload's traffic each optimizer step: the gradients to the host and the weights back, in the
      // compute format from the copy's host twin where there is one, else the FP32 weights.
      const uint64_t weights_back =
          row.ledger.host_compute_weights > 0 ? row.ledger.host_compute_weights : row.ledger.host_parameters;
      EXPECT_EQ(row.host_traffic_per_step,
                w->second.memory.offload == "optimizer" ? row.ledger.gradients + weights_back : 0);
      if (w->second.memory.offload == "optimizer") {
        EXPECT_EQ(row.ledger.optimizer, 0u);
        EXPECT_GT(row.ledger.host_optimizer, 0u);
        // Stacked on bf16 the FP32 masters leave the device, and the compute copy gets a twin on the host
        // (fp8: a staging buffer on the device); alone, on the FP32 baseline, the forward reads them there.
        const std::string& recipe = w->second.precision.recipe;
        const bool narrow_recipe = recipe != "fp32";
        EXPECT_EQ(row.ledger.master_staging > 0, recipe == "fp8");
        EXPECT_EQ(row.ledger.host_compute_weights, narrow_recipe && recipe != "fp8" ? row.ledger.compute_weights : 0u);
        EXPECT_EQ(row.ledger.parameters == 0, narrow_recipe);
        EXPECT_EQ(row.params(), row.ledger.parameters + row.ledger.master_staging + row.ledger.compute_weights);
      }
      const Config& v = w->second;
      const StepFlops f = step_flops(v.model, v.train.batch_size, v.train.seq_len,
                                     resolve_recompute(v.recompute, v.model.n_layer), true,
                                     LoraSpec::from_config(v.finetune));
      EXPECT_EQ(row.flops.recompute, f.recompute);
      EXPECT_EQ(row.flops.forward, f.forward);
      want.erase(w);
      continue;
    }
    const auto s = sharded.find(row.name);
    ASSERT_NE(s, sharded.end()) << "a row the test does not know: add what it means above";
    MemoryLedger expected = ledger_of(s->second.config);
    const DataParallelMemory dp = allocated(s->second.config, s->second.ranks, s->second.zero);
    expected.optimizer = dp.optimizer;
    expected.communication = dp.communication;
    expect_same_ledger(row.ledger, expected, row.name);
    EXPECT_EQ(row.bytes_sent_per_step, dp.bytes_sent_per_step);
    sharded.erase(s);
  }
  for (const auto& [name, config] : want) ADD_FAILURE() << "no row '" << name << "'";
  for (const auto& [name, config] : sharded) ADD_FAILURE() << "no row '" << name << "'";
}

TEST(Levers, OffloadRowsSayWhyOnABackendWhoseDeviceMemoryIsTheHosts) {
  BackendCapabilities cpu_like = capabilities();
  cpu_like.device_memory_is_host = true;
  const LeverTable table = lever_table(lever_config(), std::nullopt, cpu_like);
  for (const char* name : {"optimizer offload", "+ optimizer offload"}) {
    const LeverRow& row = row_named(table, name);
    EXPECT_NE(row.not_applicable.find("its device memory is the host's"), std::string::npos) << row.not_applicable;
  }
  for (const LeverRow& row : table.rows) EXPECT_EQ(row.ledger.host_total(), 0u) << row.name;
}

TEST(Levers, ZeroOneShardsTheOptimizerStateByTheRankCountWithBucketPadding) {
  const Config c = lever_config();
  const LeverTable table = lever_table(c, std::nullopt, capabilities());
  const LeverRow& baseline = row_named(table, "FP32 baseline");
  const int64_t n = ParameterLayout(c.model, DType::F32).num_parameters();
  const int buckets = c.model.n_layer + 1;
  for (const int ranks : {2, 4, 8}) {
    SCOPED_TRACE(ranks);
    const LeverRow& row = row_named(table, "ZeRO-1 on " + std::to_string(ranks) + " ranks");
    EXPECT_EQ(row.ledger.optimizer, allocated(c, ranks, 1).optimizer);
    // m and v of at least an even share of the elements, and of at most that share plus each bucket's padding
    // to 64 x ranks and the 256-byte alignment of every piece (at most 12 tensors per block, 4 outside).
    EXPECT_GE(row.ledger.optimizer, 2 * 4 * static_cast<uint64_t>(n / ranks));
    EXPECT_LE(row.ledger.optimizer, 2 * (4 * static_cast<uint64_t>(n / ranks + 1 + 64 * buckets) + 256 * 12 * buckets));
    EXPECT_LT(row.ledger.optimizer, baseline.ledger.optimizer / ranks + baseline.ledger.optimizer / 4);
    EXPECT_EQ(row.ledger.parameters, baseline.ledger.parameters);
    EXPECT_EQ(row.ledger.gradients, baseline.ledger.gradients);
    EXPECT_EQ(row.ledger.activations(), baseline.ledger.activations());
    EXPECT_GT(row.ledger.communication, 0u);
  }
  // One ZeRO-1 rank sends a reduce-scatter and an all-gather of the padded buckets: 2 (W-1)/W of them.
  const LeverRow& two = row_named(table, "ZeRO-1 on 2 ranks");
  EXPECT_GE(two.bytes_sent_per_step, 4.0 * static_cast<double>(n));
  EXPECT_LT(two.bytes_sent_per_step, 4.0 * static_cast<double>(n + 128 * buckets) + 1.0);
}

// The host-memory check adds up the ledgers of a node's ranks, so each must be its own rank's: under ZeRO-1 with
// offload the host holds the rank's shard of the gradients' copy and moments, as make_optimizer lays them out, and
// of the masters all of them (bf16, the model's on the host) or the shard's copy (fp32).
TEST(Levers, TheDataParallelLedgerIsEachRanksOwnStateOnTheHostAndTheDevice) {
  Config c = lever_config();
  const RecomputePolicy policy = resolve_recompute(c.recompute, c.model.n_layer);
  cpu::CpuBackend backend(1);
  GPT model(c.model, 1, c.train.seq_len, backend);
  const MemoryLedger whole = ledger_of(c);
  for (const int ranks : {2, 3}) {
    for (int r = 0; r < ranks; ++r) {
      SCOPED_TRACE(testing::Message() << "rank " << r << " of " << ranks);
      LayoutOnlyCommunicator comm(r, ranks);
      c.dist.zero = 1;
      c.memory.offload = "optimizer";
      DataParallel zero(model, comm, 1);
      // bf16: the FP32 masters are the model's on the host, all of them on every rank, which AdamW updates
      // in place, and so is the compute copy's twin; the gradients' copy and the moments are the shard's.
      const AdamW in_parameters(c.optim, model.parameter_layout(), backend, zero.optimizer_ranges(), backend,
                                DType::F32, OffloadMasters::InParameters);
      const MemoryLedger sharded = data_parallel_ledger(c, policy, c.train.batch_size, capabilities(), ranks, r);
      EXPECT_EQ(sharded.host_parameters, whole.parameters);
      EXPECT_EQ(sharded.host_compute_weights, whole.compute_weights);
      EXPECT_EQ(in_parameters.host_master_bytes(), 0u);
      EXPECT_EQ(sharded.host_gradients, in_parameters.host_gradient_bytes());
      EXPECT_EQ(sharded.host_optimizer, in_parameters.state_bytes());
      EXPECT_LT(sharded.host_total(), whole.parameters + whole.compute_weights +
                                          whole.parameters * 3 / static_cast<uint64_t>(ranks) + (64u << 10));
      EXPECT_EQ(sharded.parameters, 0u);
      EXPECT_EQ(sharded.optimizer, 0u);
      EXPECT_EQ(sharded.communication, zero.buffer_bytes());
      // fp32: the device keeps its FP32 weights and AdamW a host copy of the shard's.
      c.precision.recipe = "fp32";
      const AdamW host_copy(c.optim, model.parameter_layout(), backend, zero.optimizer_ranges(), backend, DType::F32);
      const MemoryLedger fp32 = data_parallel_ledger(c, policy, c.train.batch_size, capabilities(), ranks, r);
      EXPECT_EQ(fp32.host_parameters, host_copy.host_master_bytes());
      EXPECT_EQ(fp32.host_gradients, host_copy.host_gradient_bytes());
      EXPECT_EQ(fp32.host_optimizer, host_copy.state_bytes());
      EXPECT_LT(fp32.host_total(), whole.parameters * 4 / static_cast<uint64_t>(ranks) + (64u << 10));
      c.precision.recipe = "bf16";

      c.memory.offload = "none";
      const AdamW on_device(c.optim, model.parameter_layout(), backend, zero.optimizer_ranges());
      const MemoryLedger device = data_parallel_ledger(c, policy, c.train.batch_size, capabilities(), ranks, r);
      EXPECT_EQ(device.optimizer, on_device.state_bytes());
      EXPECT_EQ(device.host_total(), 0u);

      // Without ZeRO every rank's host holds the whole model's masters, their compute copy's twin, gradients
      // and moments.
      c.dist.zero = 0;
      c.memory.offload = "optimizer";
      const MemoryLedger replicated = data_parallel_ledger(c, policy, c.train.batch_size, capabilities(), ranks, r);
      EXPECT_EQ(replicated.host_total(), whole.parameters + whole.compute_weights + whole.gradients + whole.optimizer);
      c.memory.offload = "none";
    }
  }
}

TEST(Levers, AccumulationRowsKeepTheGlobalBatch) {
  Config c = lever_config();
  c.train.batch_size = 2;
  c.train.grad_accum_steps = 1;
  c.train.global_batch_tokens = 8 * c.train.seq_len;  // 8 sequences: 4 accumulated micro-batches of 2
  const LeverTable table = lever_table(c, std::nullopt, capabilities());
  const LeverRow& baseline = row_named(table, "FP32 baseline");
  EXPECT_EQ(baseline.variant.config.train.batch_size, 2);
  EXPECT_EQ(baseline.variant.config.train.grad_accum_steps, 4);
  // k accumulation steps of 8 / k sequences: x2 takes larger micro-batches than the configured 2 x 4.
  uint64_t previous = UINT64_MAX;
  for (const int steps : {2, 4, 8}) {
    const LeverRow& row = row_named(table, "accumulation x" + std::to_string(steps));
    SCOPED_TRACE(row.name);
    ASSERT_TRUE(row.not_applicable.empty()) << row.not_applicable;
    const TrainConfig& t = row.variant.config.train;
    EXPECT_EQ(t.grad_accum_steps, steps);
    EXPECT_EQ(t.batch_size * t.grad_accum_steps, 8);
    EXPECT_EQ(t.global_batch_tokens, 0);
    EXPECT_LT(row.ledger.activations(), previous);
    previous = row.ledger.activations();
    EXPECT_EQ(row.ledger.optimizer, baseline.ledger.optimizer);
    EXPECT_EQ(row.flops.recompute, 0.0);
    if (steps == 4) EXPECT_EQ(row.ledger.total(), baseline.ledger.total());
  }

  c.train.global_batch_tokens = 4 * c.train.seq_len;
  const LeverTable four = lever_table(c, std::nullopt, capabilities());
  const LeverRow& eight = row_named(four, "accumulation x8");
  EXPECT_NE(eight.not_applicable.find("4 sequences does not split into 8"), std::string::npos) << eight.not_applicable;
}

TEST(Levers, APlannerBudgetNothingFitsSaysWhyAndTheLedgerRowsStay) {
  const Config c = lever_config();
  const LeverTable table = lever_table(c, uint64_t{1} << 10, capabilities());
  const LeverRow& planner = table.rows.back();
  EXPECT_EQ(planner.family, "planner");
  EXPECT_NE(planner.not_applicable.find("raise memory.budget"), std::string::npos) << planner.not_applicable;
  EXPECT_EQ(planner.not_applicable.find(".cpp:"), std::string::npos) << planner.not_applicable;
  EXPECT_TRUE(row_named(table, "bf16").not_applicable.empty());
  // No LoRA row when the config trains every weight.
  for (const LeverRow& r : table.rows) EXPECT_NE(r.family, "fine-tuning") << r.name;
}

TEST(Levers, PlannerBudgetsStopAtTheFirstTheModelCannotFit) {
  Config c = lever_config();
  c.model = tiny_model(50257, 36, 1280, 20, 1024);  // GPT-2 774M at T = 1024: 12 GiB is too little
  c.train.seq_len = 1024;
  c.train.batch_size = 8;
  c.train.grad_accum_steps = 1;
  c.precision.recipe = "fp32";
  const std::vector<uint64_t> budgets = planner_budgets(c, std::nullopt, capabilities());
  ASSERT_GE(budgets.size(), 2u);
  EXPECT_TRUE(std::is_sorted(budgets.rbegin(), budgets.rend()));
  for (size_t i = 0; i + 1 < budgets.size(); ++i) EXPECT_NO_THROW(choose_memory_plan(c, budgets[i], capabilities()));
  EXPECT_THROW(choose_memory_plan(c, budgets.back(), capabilities()), Error);
  // The list stops at the first size that fails, not at the smallest: 774M needs some GiB even with the
  // optimizer and the FP32 masters in host memory (bf16 activations, compute copy and gradients).
  EXPECT_GE(budgets.back(), uint64_t{4} << 30);
  EXPECT_EQ(planner_budgets(c, uint64_t{1} << 30, capabilities()), std::vector<uint64_t>{uint64_t{1} << 30});
}

// The text row's cells as format_bytes writes them, split into words: name, then the numbers.
std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(Levers, JsonParsesAndCarriesTheTextsNumbers) {
  TempDir dir;
  const std::string path = dir.file("levers.yaml");
  // fp32, so that a 2 MiB budget fits on the CPU backend (whose narrow products hold a 16 MiB workspace) by
  // accumulating smaller micro-batches.
  Config c = lever_config();
  c.precision.recipe = "fp32";
  std::ofstream(path) << config_to_yaml(c);
  const CommandResult text = run_cli("plan " + path + " --levers --budget 2MiB");
  const CommandResult json = run_cli("plan " + path + " --levers --json --budget 2MiB", dir.file("stderr.txt"));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json j = nlohmann::json::parse(json.output);
  ASSERT_GE(j["rows"].size(), 20u);
  EXPECT_EQ(j["seq_len"], 32);
  const std::vector<std::string> lines = [&] {
    std::vector<std::string> out;
    std::istringstream in(text.output);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }();
  for (const auto& row : j["rows"]) {
    const std::string name = row["name"];
    SCOPED_TRACE(name);
    // On the CPU backend only offload cannot apply (its device memory is the host's).
    if (name.find("optimizer offload") != std::string::npos) {
      EXPECT_FALSE(row["applies"].get<bool>());
      continue;
    }
    ASSERT_TRUE(row["applies"].get<bool>()) << row["not_applicable"];
    const auto& b = row["bytes"];
    const uint64_t sum = b["params"].get<uint64_t>() + b["gradients"].get<uint64_t>() + b["optimizer"].get<uint64_t>() +
                         b["activations"].get<uint64_t>() + b["other"].get<uint64_t>();
    EXPECT_EQ(sum, b["total"].get<uint64_t>());
    const uint64_t sent = row["bytes_sent_per_step"];
    EXPECT_EQ(b["host"].get<uint64_t>(), 0u);
    EXPECT_EQ(row["host_traffic_per_step"].get<uint64_t>(), 0u);
    std::vector<std::string> cells = words(
        fmt::format("{} {} {} {} {} {} - {:.1f}% {} -", format_bytes(b["params"]), format_bytes(b["gradients"]),
                    format_bytes(b["optimizer"]), format_bytes(b["activations"]), format_bytes(b["other"]),
                    format_bytes(b["total"]), 100.0 * row["flops"]["recompute_share"].get<double>(),
                    row["run"]["ranks"].get<int>() > 1 ? format_bytes(sent) : "-"));
    int matches = 0;
    for (const std::string& line : lines) {
      if (line.size() < 40 || line.substr(2, name.size()) != name || line.find_first_not_of(' ', 2 + name.size()) < 40) continue;
      ++matches;
      EXPECT_EQ(words(line.substr(40)), cells) << line;
    }
    EXPECT_EQ(matches, 1) << text.output;
  }
  const LeverTable table = lever_table(c, 2 << 20, cpu::CpuBackend(1).capabilities());
  const LeverRow& planner = row_named(table, "memory.budget 2.0 MiB");
  EXPECT_EQ(j["rows"].back()["name"], planner.name);
  EXPECT_EQ(j["rows"].back()["run"]["batch_size"], planner.variant.config.train.batch_size);
  EXPECT_LT(planner.variant.config.train.batch_size, c.train.batch_size);
  EXPECT_EQ(j["rows"].back()["bytes"]["total"], planner.ledger.total());
}

TEST(Levers, JsonWithoutLeversIsAClearError) {
  TempDir dir;
  const std::string path = dir.file("levers.yaml");
  std::ofstream(path) << config_to_yaml(lever_config());
  const CommandResult r = run_cli("plan " + path + " --json");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--json prints the table of levers"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("add --levers"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gpt::test

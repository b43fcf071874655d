// A backend that holds device memory of its own outside the arenas, as the CUDA backend reserves its
// cuBLASLt workspace and an op scratch at construction: the ledger, `gpt-train plan`'s report and the
// budget planner count it on a line of its own and in every total, and the first step's check finds it
// planned == measured; a backend that grows its reserve during a step is caught.
#include "backend/forwarding_backend.h"
#include "memory/arena_usage.h"
#include "memory/ledger.h"
#include "memory/plan_report.h"
#include "memory/planner.h"
#include "model/gpt.h"
#include "train/memory_check.h"

#include "cpu/gradcheck.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpt::test {
namespace {

// The CPU backend, reporting `reserved` bytes of its own.
class ReservingBackend final : public ForwardingBackend {
 public:
  ReservingBackend(Backend& inner, size_t reserved) : ForwardingBackend(inner), reserved_(reserved) {}
  // What the backend holds from now on (a backend that grew its scratch inside an op).
  void reserve(size_t bytes) { reserved_ = bytes; }

  std::string name() const override { return "reserving " + ForwardingBackend::name(); }
  BackendCapabilities capabilities() const override {
    BackendCapabilities c = ForwardingBackend::capabilities();
    c.reserved_device_bytes = reserved_;
    return c;
  }
  size_t workspace_bytes() const override { return reserved_; }

 private:
  size_t reserved_;
};

constexpr size_t kReserved = 3u << 20;  // 3 MiB: a cuBLASLt workspace's order of size

Config workspace_config() {
  Config c;
  c.model = tiny_model(64, 2, 32, 2, 16);
  c.train.batch_size = 4;
  c.train.seq_len = 16;
  c.train.grad_accum_steps = 2;
  return c;
}

BackendCapabilities reserving(size_t bytes) {
  BackendCapabilities c;
  c.reserved_device_bytes = bytes;
  return c;
}

TEST(BackendWorkspace, LedgerCountsItOnALineOfItsOwnAndInTheTotal) {
  const Config c = workspace_config();
  const RecomputePolicy policy = resolve_recompute(c.recompute, c.model.n_layer);
  const MemoryLedger without = ledger_for(c, policy, 4, BackendCapabilities{});
  const MemoryLedger with = ledger_for(c, policy, 4, reserving(kReserved));
  EXPECT_EQ(without.backend_workspace, 0u);
  EXPECT_EQ(with.backend_workspace, kReserved);
  EXPECT_EQ(with.total(), without.total() + kReserved);
  EXPECT_EQ(with.activations(), without.activations());
  const std::string table = with.table();
  const size_t line = table.find("backend workspace");
  ASSERT_NE(line, std::string::npos) << table;
  EXPECT_NE(table.substr(line, table.find('\n', line) - line).find("3.0 MiB"), std::string::npos) << table;
}

TEST(BackendWorkspace, PlanReportCountsItInEveryRow) {
  const Config c = workspace_config();
  const RecomputePolicy policy = resolve_recompute(c.recompute, c.model.n_layer);
  const MemoryLedger with = ledger_for(c, policy, 4, reserving(kReserved));
  const std::string report = plan_report(c, std::nullopt, reserving(kReserved));
  EXPECT_NE(report.find(fmt::format("{} in total", format_bytes(with.total()))), std::string::npos) << report;
  EXPECT_NE(report.find("backend workspace"), std::string::npos) << report;
  EXPECT_NE(report.find("includes the 3.0 MiB of device memory the backend reserves"), std::string::npos) << report;
  // Without a reserve the report says nothing of one beyond the ledger's zero line.
  EXPECT_EQ(plan_report(c, std::nullopt, BackendCapabilities{}).find("reserves for itself"), std::string::npos);
}

// A budget that holds the configured plan exactly on a backend without a reserve no longer holds it once
// the backend reserves what halving the micro-batch saves: the planner then accumulates micro-batches of 2,
// and its choice, reserve included, fits.
TEST(BackendWorkspace, BudgetPlannerMakesRoomForIt) {
  const Config c = workspace_config();
  const RecomputePolicy policy = resolve_recompute(c.recompute, c.model.n_layer);
  const uint64_t budget = ledger_for(c, policy, 4, BackendCapabilities{}).total();
  const uint64_t halving_saves = budget - ledger_for(c, policy, 2, BackendCapabilities{}).total();
  // Precision stays fp32 (a backend without narrow storage), so that only the micro-batch can give way.
  BackendCapabilities backend;
  backend.stores_low_precision = false;
  const MemoryChoice free = choose_memory_plan(c, budget, backend);
  EXPECT_EQ(free.batch_size, 4);
  EXPECT_EQ(free.grad_accum_steps, 2);
  backend.reserved_device_bytes = halving_saves;
  const MemoryChoice reserved = choose_memory_plan(c, budget, backend);
  EXPECT_EQ(reserved.batch_size, 2) << reserved.reason;
  EXPECT_EQ(reserved.grad_accum_steps, 4);
  EXPECT_EQ(reserved.policy.mode, RecomputeMode::None);
  EXPECT_EQ(reserved.ledger.backend_workspace, halving_saves);
  EXPECT_EQ(reserved.ledger.total(), budget);
  // No plan fits in the reserve alone.
  const std::string message = error_message([&] { choose_memory_plan(c, kReserved, reserving(kReserved)); });
  EXPECT_NE(message.find("raise memory.budget to at least"), std::string::npos) << message;
}

// The first step's check: what the step wrote of the activation arena and what the backend holds after it,
// beside the ledger planned for the same backend.
TEST(BackendWorkspace, FirstStepFindsPlannedEqualToMeasured) {
  const Config c = workspace_config();
  const RecomputePolicy policy = resolve_recompute(c.recompute, c.model.n_layer);
  ReservingBackend backend(cpu_backend(), kReserved);
  const MemoryLedger planned = ledger_for(c, policy, c.train.batch_size, backend.capabilities());
  GPT model(c.model, c.train.batch_size, c.train.seq_len, backend, DType::F32, policy, PrecisionRecipe{});
  model.init_weights(5);
  poison_arena(model.activation_arena(), backend);
  const std::optional<DeviceMemoryUse> device_before = backend.device_memory();
  const std::vector<int32_t> tokens = random_tokens(c.train.batch_size * c.train.seq_len, c.model.vocab_size, 1);
  const StepContext ctx{1, 0, 0, true};
  model.zero_grads();
  model.forward(tokens, tokens, c.train.batch_size, c.train.seq_len, ctx, 1.0f / static_cast<float>(tokens.size()));
  model.backward(ctx);
  model.gradient_norm_squared();  // the step's last use of the activation arena (its reduction scratch)

  const MeasuredMemory measured = measure_step_memory(model.activation_arena(), backend, device_before);
  EXPECT_EQ(measured.backend_workspace, kReserved);
  const PlannedVsMeasured check = compare_with_ledger(planned, measured);
  EXPECT_TRUE(check.equal);
  // The CPU's device memory is the host's: no device line, nothing from cudaMemGetInfo.
  EXPECT_FALSE(measured.device_after.has_value());
  ASSERT_EQ(check.lines.size(), 3u);
  EXPECT_TRUE(check.notes.empty());
  EXPECT_EQ(check.lines[1], fmt::format("backend workspace: planned 3.0 MiB ({0} B), measured 3.0 MiB ({0} B): equal",
                                        kReserved));

  // A backend that grew its scratch during the step holds more than was planned.
  backend.reserve(kReserved + 4096);
  const PlannedVsMeasured grown = compare_with_ledger(planned, measure_step_memory(model.activation_arena(), backend, std::nullopt));
  EXPECT_FALSE(grown.equal);
  EXPECT_NE(grown.lines[1].find("DIFFERENT"), std::string::npos) << grown.lines[1];
  EXPECT_NE(grown.lines[0].find("equal"), std::string::npos) << grown.lines[0];
}

}  // namespace
}  // namespace gpt::test

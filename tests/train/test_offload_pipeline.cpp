// Optimizer offload's pipeline (memory.offload: optimizer, optim/adamw.h) on the CPU backend, where every
// transfer is a copy done at once, so the order in which the step queues things is the order it runs them:
//   - the order of one step, recorded by a backend that logs each op and transfer: each block's gradient
//     copy is queued right after backward finished the block, before the blocks below it; AdamW goes unit
//     by unit after the norm, each unit waiting only for its own copy, and its weights' copy back is queued
//     before the next unit's AdamW; the ops are ordered behind the last copy before anything else is queued;
//   - with the masters on the host (bf16), each unit's AdamW writes its compute copy (where device memory is
//     not the host's, into the copy's host twin, whose tensors are queued to the device one by one) before
//     the next unit's AdamW, and the next forward casts nothing;
//   - an update whose hook staged only some blocks (the rest copied by the update) equals AdamW on the
//     device bit for bit;
//   - the host-side failures (host memory refused, a block staged twice or out of range, a shard staged,
//     gradients of another format than their host copy) are errors that say what and where.
// The CUDA side (pinned memory, the copy stream on the emulator) is tests/cuda/model/test_cuda_offload_pipeline.cpp.
#include "backend/forwarding_backend.h"
#include "backend/separate_host_memory_backend.h"
#include "core/random.h"
#include "dist/data_parallel.h"
#include "dist/single_communicator.h"
#include "memory/planner.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "test_util.h"
#include "train/offload.h"
#include "train/step_runner.h"
#include "train/synthetic_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace gpt::test {
namespace {

struct Event {
  std::string what;  // the op, or d2h / h2d / wait / order
  uint64_t ticket = 0;
  bool operator==(const Event&) const = default;
};

// Logs the calls the pipeline's order is made of; numbers the transfers itself (the CPU's are all 0). A
// second one may log into the first's events (a host backend beside the device's), so that one log has both.
class RecordingBackend final : public ForwardingBackend {
 public:
  explicit RecordingBackend(Backend& inner) : ForwardingBackend(inner) {}
  RecordingBackend(Backend& inner, RecordingBackend& log_into) : ForwardingBackend(inner), log_(&log_into) {}
  void matmul(const MatmulArgs& a) override { log("matmul", [&] { ForwardingBackend::matmul(a); }); }
  void embedding_forward(const EmbeddingForwardArgs& a) override {
    log("embedding_forward", [&] { ForwardingBackend::embedding_forward(a); });
  }
  void embedding_backward(const EmbeddingBackwardArgs& a) override {
    log("embedding_backward", [&] { ForwardingBackend::embedding_backward(a); });
  }
  void sum_of_squares(const SumOfSquaresArgs& a) override {
    log("sum_of_squares", [&] { ForwardingBackend::sum_of_squares(a); });
  }
  void adamw_update(const AdamWArgs& a) override { log("adamw", [&] { ForwardingBackend::adamw_update(a); }); }
  void cast(const CastArgs& a) override { log("cast", [&] { ForwardingBackend::cast(a); }); }
  uint64_t transfer_to_host(void* dst, const void* src, size_t bytes) override {
    ForwardingBackend::transfer_to_host(dst, src, bytes);
    log_->events.push_back({"d2h", ++log_->tickets});
    return log_->tickets;
  }
  uint64_t transfer_to_device(void* dst, const void* src, size_t bytes) override {
    ForwardingBackend::transfer_to_device(dst, src, bytes);
    log_->events.push_back({"h2d", ++log_->tickets});
    return log_->tickets;
  }
  void wait_transfer(uint64_t ticket) override { log_->events.push_back({"wait", ticket}); }
  void order_after_transfers() override { log_->events.push_back({"order", 0}); }

  std::vector<Event> events;
  uint64_t tickets = 0;

 private:
  template <class F>
  void log(const char* what, F&& f) {
    log_->events.push_back({what, 0});
    f();
  }
  RecordingBackend* log_ = this;
};

size_t find(const std::vector<Event>& events, const std::string& what, size_t from = 0) {
  for (size_t i = from; i < events.size(); ++i)
    if (events[i].what == what) return i;
  return events.size();
}

size_t find_last(const std::vector<Event>& events, const std::string& what, size_t before) {
  for (size_t i = std::min(before, events.size()); i-- > 0;)
    if (events[i].what == what) return i;
  return events.size();
}

// Runs steps 0 and 1 on the tokens (a i + b) mod 16 and leaves only step 1's events in the log (step 0 casts
// the compute copy from freshly initialised masters); returns the tokens for later steps.
std::vector<int32_t> record_second_step(StepRunner& runner, RecordingBackend& backend, const Config& c, int a, int b) {
  std::vector<int32_t> tokens(static_cast<size_t>(c.train.batch_size * c.train.seq_len));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((a * static_cast<int>(i) + b) % 16);
  runner.run(0, tokens, tokens);
  backend.events.clear();
  runner.run(1, tokens, tokens);
  return tokens;
}

// The pipeline tests' model and steps: 3 blocks, B2 T8, 4 steps, the optimizer offloaded.
Config pipeline_run() {
  Config c;
  c.model = tiny_model(16, 3, 16, 2, 8);
  c.train.batch_size = 2;
  c.train.seq_len = 8;
  c.train.steps = 4;
  c.memory.offload = "optimizer";
  return c;
}

TEST(OffloadPipeline, EachBlocksCopyIsQueuedAsBackwardFinishesItAndAdamWGoesUnitByUnit) {
  auto cpu = make_backend(BackendKind::Cpu, {1});
  RecordingBackend backend(*cpu);
  Config c = pipeline_run();
  c.optim.grad_clip = 0.5;
  GPT model(c.model, c.train.batch_size, c.train.seq_len, backend);
  model.init_weights(3);
  SingleCommunicator comm;
  DataParallel dp(model, comm, 0);
  std::unique_ptr<Backend> host_backend;
  std::unique_ptr<AdamW> optimizer = make_optimizer(c, model, dp, backend, 1, host_backend);
  ASSERT_TRUE(optimizer->offloaded());
  EXPECT_FALSE(optimizer->host_memory_pinned());  // the CPU backend has no pinned memory to give
  StepRunner runner(c, model, dp, *optimizer, nullptr);
  record_second_step(runner, backend, c, 7, 3);
  const std::vector<Event>& e = backend.events;

  const int L = c.model.n_layer;
  ASSERT_EQ(optimizer->num_units(), L + 1);
  // Backward: unit u's copies (block L-1-u, then the embeddings) form one group, queued after the block's
  // backward and before the next block's matrix products.
  std::vector<Event> expected_after_norm;
  size_t at = find(e, "embedding_forward");
  ASSERT_LT(at, e.size());
  std::vector<uint64_t> landed;
  for (int u = 0; u <= L; ++u) {
    SCOPED_TRACE("unit " + std::to_string(u));
    const size_t first = find(e, "d2h", at);
    ASSERT_LT(first, e.size());
    const size_t pieces = optimizer->unit_pieces(u).size();
    for (size_t p = 0; p < pieces; ++p) ASSERT_EQ(e.at(first + p).what, "d2h") << "piece " << p;
    // Some backward work of this unit's block (or the embeddings' backward) ran since the previous group.
    const std::string work = u < L ? "matmul" : "embedding_backward";
    EXPECT_LT(find(e, work, at), first) << work << " of unit " << u << " before its copies";
    landed.push_back(e.at(first + pieces - 1).ticket);
    at = first + pieces;
  }
  // Block L-1's copies precede block 0's backward products: the copies are queued during backward.
  EXPECT_LT(find(e, "d2h"), find_last(e, "matmul", find(e, "embedding_backward")));
  // The norm reads every gradient after the last copy was queued; then the units, in order.
  const size_t norm = find(e, "sum_of_squares", at);
  ASSERT_LT(norm, e.size());
  EXPECT_EQ(find(e, "adamw"), find(e, "adamw", norm)) << "an AdamW ran before the norm";
  uint64_t ticket = backend.tickets - [&] {
    size_t sent = 0;
    for (int u = 0; u <= L; ++u) sent += optimizer->unit_pieces(u).size();
    return sent;
  }();
  for (int u = 0; u <= L; ++u) {
    expected_after_norm.push_back({"wait", landed[static_cast<size_t>(u)]});
    for (size_t p = 0; p < optimizer->unit_pieces(u).size(); ++p) expected_after_norm.push_back({"adamw", 0});
    for (size_t p = 0; p < optimizer->unit_pieces(u).size(); ++p) expected_after_norm.push_back({"h2d", ++ticket});
  }
  expected_after_norm.push_back({"order", 0});
  const size_t first_wait = find(e, "wait", norm);
  ASSERT_LE(first_wait + expected_after_norm.size(), e.size());
  EXPECT_EQ(std::vector<Event>(e.begin() + static_cast<std::ptrdiff_t>(first_wait),
                               e.begin() + static_cast<std::ptrdiff_t>(first_wait + expected_after_norm.size())),
            expected_after_norm);
  // No compute is queued after the norm before the ordering behind the weights' copies: the next forward,
  // queued after it, reads them as they landed.
  EXPECT_EQ(find(e, "matmul", norm), e.size());
  EXPECT_EQ(find(e, "embedding_forward", norm), e.size());
}

TEST(OffloadPipeline, AnUpdateWithSomeBlocksStagedEqualsAdamWOnTheDeviceBitwise) {
  auto backend = make_backend(BackendKind::Cpu, {2});
  auto host = make_backend(BackendKind::Cpu, {2});
  const ModelConfig m = tiny_model(16, 4, 16, 2, 8);
  GPT a(m, 2, 8, *backend), b(m, 2, 8, *backend);
  a.init_weights(9);
  b.init_weights(9);
  const ParameterLayout& layout = a.parameter_layout();
  OptimConfig config;
  config.weight_decay = 0.1;
  AdamW device(config, layout, *backend);
  AdamW offloaded(config, layout, *backend, whole_tensors(layout), *host, DType::F32);
  HostRng rng(5, 1);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> grads(a.gradient_arena().layout().total_bytes() / 4);
    for (float& g : grads) g = static_cast<float>(rng.uniform() - 0.5);
    for (GPT* model : {&a, &b}) backend->copy_to_device(model->gradient_arena().base(), grads.data(), grads.size() * 4);
    device.step(a.parameter_arena(), a.gradient_arena(), 1e-2, 0.6);
    // Blocks 3 and 1 staged, as a hook that stopped early would leave it; the update copies the rest.
    offloaded.stage_gradients(3, b.gradient_arena());
    offloaded.stage_gradients(1, b.gradient_arena());
    offloaded.step(b.parameter_arena(), b.gradient_arena(), 1e-2, 0.6);
    EXPECT_EQ(a.parameters_to_host(), b.parameters_to_host()) << "step " << step;
    EXPECT_GE(offloaded.last_host_ms(), offloaded.last_adamw_ms());
  }
  EXPECT_EQ(offloaded.state_to_host(), device.state_to_host());
}

// With the masters on the host (bf16) the update writes the compute copy as it updates each unit: on the
// CPU into the device's copy itself; where device memory is not the host's into the copy's host twin, whose
// part of each unit (one tensor at a time, in the compute format) is queued to the device before the next
// unit's AdamW. Either way the next forward casts nothing, and the device's copy is the twin's bytes.
TEST(OffloadPipeline, WithTheMastersOnTheHostEachUnitWritesItsComputeCopyBeforeTheNextUnitsAdamW) {
  for (const bool separate_host : {false, true}) {
    SCOPED_TRACE(separate_host ? "device memory not the host's" : "the CPU");
    auto cpu = make_backend(BackendKind::Cpu, {1});
    SeparateHostMemoryBackend gpu_like(*cpu);
    RecordingBackend backend(separate_host ? static_cast<Backend&>(gpu_like) : *cpu);
    Config c = pipeline_run();
    c.precision.recipe = "bf16";
    ASSERT_TRUE(masters_on_host(c));
    std::unique_ptr<Backend> host_backend;
    auto host_cpu = make_backend(BackendKind::Cpu, {1});
    if (separate_host) host_backend = std::make_unique<RecordingBackend>(*host_cpu, backend);
    Backend& host = offload_host(backend, 1, host_backend);
    EXPECT_EQ(&host == &backend, !separate_host);  // the CPU's device memory is the host's
    GPT model(c.model, c.train.batch_size, c.train.seq_len, backend, DType::F32, {}, precision_recipe(c.precision),
              {}, &host);
    model.init_weights(3);
    EXPECT_EQ(model.master_staging_arena(), nullptr);
    ASSERT_EQ(model.host_compute_arena() != nullptr, separate_host);
    SingleCommunicator comm;
    DataParallel dp(model, comm, 0);
    std::unique_ptr<AdamW> optimizer = make_optimizer(c, model, dp, backend, 1, host_backend);
    ASSERT_TRUE(optimizer->masters_in_parameters());
    ASSERT_TRUE(optimizer->writes_compute_copy());
    EXPECT_EQ(optimizer->host_master_bytes(), 0u);
    StepRunner runner(c, model, dp, *optimizer, nullptr);
    const std::vector<int32_t> tokens = record_second_step(runner, backend, c, 5, 1);

    // Each unit: its gradients' wait, AdamW over its pieces (each writing its slice of the copy), then
    // with a twin one copy to the device per tensor of the part.
    const int L = c.model.n_layer;
    const ArenaLayout& layout = model.parameter_layout().arena_layout();
    auto tensors_of_part = [&](bool outside) {
      int64_t n = 0;
      for (const ArenaBuffer& b : layout.buffers()) n += outside_blocks(b.name) == outside;
      return n;
    };
    std::vector<std::string> expected;
    for (int u = 0; u <= L; ++u) {
      expected.push_back("wait");
      for (size_t p = 0; p < optimizer->unit_pieces(u).size(); ++p) expected.push_back("adamw");
      if (separate_host)
        for (int64_t k = 0; k < tensors_of_part(u == L); ++k) expected.push_back("h2d");
    }
    expected.push_back("order");
    const std::vector<Event>& e = backend.events;
    const size_t first_wait = find_last(e, "wait", find(e, "adamw"));
    ASSERT_LE(first_wait + expected.size(), e.size());
    std::vector<std::string> got;
    for (size_t i = first_wait; i < first_wait + expected.size(); ++i) got.push_back(e[i].what);
    EXPECT_EQ(got, expected);
    // The update left the whole compute copy fresh: the next forward starts without a cast.
    backend.events.clear();
    runner.run(2, tokens, tokens);
    EXPECT_LT(find(backend.events, "embedding_forward"), find(backend.events, "cast"));
    if (separate_host) {
      const Arena &copy = *model.compute_weight_arena(), &twin = *model.host_compute_arena();
      ASSERT_EQ(copy.layout().total_bytes(), twin.layout().total_bytes());
      EXPECT_EQ(std::memcmp(copy.base(), twin.base(), copy.layout().total_bytes()), 0);
    }
  }
}

class RefusingHost final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void* allocate(size_t bytes) override { GPT_FAIL("cpu backend: could not allocate {} bytes", bytes); }
};

TEST(OffloadPipeline, HostSideFailuresSayWhatAndWhere) {
  auto backend = make_backend(BackendKind::Cpu, {1});
  ArenaLayout plan("offload_masters");
  plan.add("wte", {1024}, DType::F32);
  RefusingHost refusing(*backend);
  const std::string no_memory = error_message([&] { Arena arena(plan, refusing, backend.get()); });
  for (const std::string part : {"memory.offload: optimizer", "offload_masters", "could not allocate", "memory.offload: none"})
    EXPECT_NE(no_memory.find(part), std::string::npos) << part << " not in: " << no_memory;
  {
    Arena arena(plan, *backend, backend.get());
    EXPECT_FALSE(arena.pinned());
    EXPECT_EQ(arena.tensor(0).numel(), 1024);
  }

  const ModelConfig m = tiny_model(16, 2, 16, 2, 8);
  GPT model(m, 2, 8, *backend);
  model.init_weights(1);
  const ParameterLayout& layout = model.parameter_layout();
  std::vector<ParamRange> shard;
  for (const ParamRange& r : whole_tensors(layout)) shard.push_back({r.tensor, 0, r.count / 2});
  OptimConfig config;
  AdamW whole(config, layout, *backend, whole_tensors(layout), *backend, DType::F32);
  EXPECT_NE(error_message([&] { whole.stage_gradients(2, model.gradient_arena()); }).find("block 2 outside [-1, 2)"),
            std::string::npos);
  whole.stage_gradients(1, model.gradient_arena());
  EXPECT_NE(error_message([&] { whole.stage_gradients(1, model.gradient_arena()); }).find("staged twice"),
            std::string::npos);
  whole.forget_staged_gradients();
  whole.stage_gradients(1, model.gradient_arena());  // forgotten, it may be staged again

  AdamW sharded(config, layout, *backend, shard, *backend, DType::F32);
  EXPECT_NE(error_message([&] { sharded.stage_gradients(0, model.gradient_arena()); }).find("owns a shard"),
            std::string::npos);

  // A host copy in BF16 for gradients the arena holds in FP32: named with both formats and the range.
  AdamW narrow(config, layout, *backend, whole_tensors(layout), *backend, DType::BF16);
  const std::string format =
      error_message([&] { narrow.step(model.parameter_arena(), model.gradient_arena(), 1e-3, 1.0); });
  for (const std::string part : {"offloaded AdamW: range ", "f32 gradients", "its host copy holds", "bf16"})
    EXPECT_NE(format.find(part), std::string::npos) << part << " not in: " << format;

  // The masters leave the device only where the products read a compute copy.
  const std::string fp32_masters =
      error_message([&] { GPT on_host(m, 2, 8, *backend, DType::F32, {}, PrecisionRecipe{}, {}, backend.get()); });
  for (const std::string part : {"compute copy", "the fp32 recipe"})
    EXPECT_NE(fp32_masters.find(part), std::string::npos) << part << " not in: " << fp32_masters;
}

}  // namespace
}  // namespace gpt::test

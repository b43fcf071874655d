// ProfilingBackend: every op reaches the wrapped backend once, unchanged, between two synchronize()
// calls, and every other call of the interface once, untimed; calls are counted per op, per category and
// per GEMM shape; a model run through it gives bitwise the results of the bare backend, and issues
// exactly the GEMM shapes the bench's peak measurement assumes. No test asserts a duration beyond its sign.
#include "backend/profiling_backend.h"
#include "bench/gemm_peak.h"
#include "cpu/cpu_backend.h"
#include "dist/single_communicator.h"
#include "model/gpt.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace gpt {
namespace {

// Records the order of calls: op names, "sync" for synchronize(), and the out tensor's (or the call's
// destination) data pointer. Its own answers (tickets, workspace bytes, the pinned block) are numbers no
// default gives, so a call the wrapper answered itself shows.
class RecordingBackend final : public Backend {
 public:
  std::vector<std::string> log;
  std::vector<const void*> outs;
  uint64_t tickets = 40;
  alignas(16) char pinned[64] = {};

  std::string name() const override { return "recording"; }
  Device device() const override { return Device::CPU; }
  BackendCapabilities capabilities() const override { return {false, false}; }
  size_t workspace_bytes() const override { return 12345; }
  std::optional<DeviceMemoryUse> device_memory() const override { return DeviceMemoryUse{111, 222, 333}; }
  void* allocate(size_t bytes) override {
    void* p = std::malloc(bytes);
    record("allocate", p);
    return p;
  }
  void deallocate(void* ptr) override {
    record("deallocate", ptr);
    std::free(ptr);
  }
  void* allocate_pinned(size_t) override {
    record("allocate_pinned", pinned);
    return pinned;
  }
  void deallocate_pinned(void* ptr) override { record("deallocate_pinned", ptr); }
  uint64_t transfer_to_host(void* dst, const void* src, size_t bytes) override {
    record("transfer_to_host", dst);
    std::memcpy(dst, src, bytes);
    return ++tickets;
  }
  uint64_t transfer_to_device(void* dst, const void* src, size_t bytes) override {
    record("transfer_to_device", dst);
    std::memcpy(dst, src, bytes);
    return ++tickets;
  }
  void wait_transfer(uint64_t ticket) override { record("wait_transfer " + std::to_string(ticket), nullptr); }
  void order_after_transfers() override { record("order_after_transfers", nullptr); }
  std::unique_ptr<Communicator> make_communicator(Communicator& host) override {
    record("make_communicator", &host);
    return nullptr;
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    record("copy_to_device", dst);
    std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    record("copy_to_host", dst);
    std::memcpy(dst, src, bytes);
  }
  void synchronize() override { log.push_back("sync"); }
  void fill(const FillArgs& a) override { record("fill", a.out.data); }
  void copy(const CopyArgs& a) override { record("copy", a.out.data); }
  void matmul(const MatmulArgs& a) override { record("matmul", a.out.data); }
  void bias_backward(const BiasBackwardArgs& a) override { record("bias_backward", a.dbias.data); }
  void layernorm_forward(const LayerNormForwardArgs& a) override { record("layernorm_forward", a.out.data); }
  void layernorm_backward(const LayerNormBackwardArgs& a) override { record("layernorm_backward", a.din.data); }
  void residual_layernorm_forward(const ResidualLayerNormForwardArgs& a) override {
    record("residual_layernorm_forward", a.norm.out.data);
  }
  void layernorm_residual_backward(const LayerNormResidualBackwardArgs& a) override {
    record("layernorm_residual_backward", a.norm.din.data);
  }
  void attention_forward(const AttentionForwardArgs& a) override { record("attention_forward", a.out.data); }
  void attention_backward(const AttentionBackwardArgs& a) override { record("attention_backward", a.dqkv.data); }
  void attention_decode(const AttentionDecodeArgs& a) override { record("attention_decode", a.out.data); }
  void softmax_forward(const SoftmaxForwardArgs& a) override { record("softmax_forward", a.out.data); }
  void softmax_backward(const SoftmaxBackwardArgs& a) override { record("softmax_backward", a.din.data); }
  void gelu_forward(const GeluForwardArgs& a) override { record("gelu_forward", a.out.data); }
  void gelu_backward(const GeluBackwardArgs& a) override { record("gelu_backward", a.din.data); }
  void residual_forward(const ResidualForwardArgs& a) override { record("residual_forward", a.out.data); }
  void residual_backward(const ResidualBackwardArgs& a) override { record("residual_backward", a.dx.data); }
  void embedding_forward(const EmbeddingForwardArgs& a) override { record("embedding_forward", a.out.data); }
  void embedding_backward(const EmbeddingBackwardArgs& a) override { record("embedding_backward", a.dwte.data); }
  void cross_entropy(const CrossEntropyArgs& a) override { record("cross_entropy", a.losses.data); }
  void adamw_update(const AdamWArgs& a) override { record("adamw_update", a.params.data); }
  void sum_of_squares(const SumOfSquaresArgs& a) override { record("sum_of_squares", a.out.data); }
  void cast(const CastArgs& a) override { record("cast", a.out.data); }
  void amax(const AmaxArgs& a) override { record("amax", a.out.data); }
  void quantize_roundtrip(const QuantizeRoundtripArgs& a) override { record("quantize_roundtrip", a.out.data); }
  void fp8_current_scale(const Fp8CurrentScaleArgs& a) override { record("fp8_current_scale", a.in.data); }

 private:
  void record(std::string op, const void* out) {
    log.push_back(std::move(op));
    outs.push_back(out);
  }
};

TEST(ProfilingBackend, ForwardsEveryOpOnceBetweenSynchronizes) {
  RecordingBackend inner;
  ProfilingBackend prof(inner);
  EXPECT_EQ(prof.name(), "recording");
  EXPECT_EQ(prof.device(), Device::CPU);
  EXPECT_FALSE(prof.attention_keeps_probs());
  EXPECT_FALSE(prof.stores_low_precision());  // forwarded whole, not one capability at a time

  float storage[8] = {};
  const Tensor t(storage, {2, 4});
  char host[32] = {};
  prof.fill({t, 1.0f});
  prof.copy({t, t});
  prof.matmul({t, t, t, Tensor(), false, true});
  prof.bias_backward({t, t});
  prof.layernorm_forward({t});
  prof.layernorm_backward({t});
  prof.residual_layernorm_forward({{}, {t}});
  prof.layernorm_residual_backward({{t}, {}});
  prof.attention_forward({t});
  prof.attention_backward({t});
  prof.attention_decode({t});
  prof.softmax_forward({t, t});
  prof.softmax_backward({t, t, t});
  prof.gelu_forward({t, t});
  prof.gelu_backward({t, t, t});
  prof.residual_forward({t, t, t});
  prof.residual_backward({t, t});
  prof.embedding_forward({t});
  prof.embedding_backward({t});
  CrossEntropyArgs ce;
  ce.losses = t;
  prof.cross_entropy(ce);
  AdamWArgs adam;
  adam.params = t;
  prof.adamw_update(adam);
  prof.sum_of_squares({t, t});
  CastArgs cast;
  cast.out = t;
  prof.cast(cast);
  AmaxArgs amax;
  amax.out = t;
  prof.amax(amax);
  QuantizeRoundtripArgs q;
  q.out = t;
  prof.quantize_roundtrip(q);
  Fp8CurrentScaleArgs scale;
  scale.in = t;
  prof.fp8_current_scale(scale);
  prof.copy_to_device(storage, host, sizeof(host));
  prof.copy_to_host(host, storage, sizeof(host));

  ASSERT_EQ(inner.log.size(), 3u * kNumProfiledOps);
  for (int i = 0; i < kNumProfiledOps; ++i) {
    const auto op = static_cast<ProfiledOp>(i);
    EXPECT_EQ(inner.log[3 * i], "sync") << profiled_op_name(op);
    EXPECT_EQ(inner.log[3 * i + 1], profiled_op_name(op));
    EXPECT_EQ(inner.log[3 * i + 2], "sync") << profiled_op_name(op);
    EXPECT_EQ(prof.timing(op).calls, 1) << profiled_op_name(op);
    EXPECT_GE(prof.timing(op).seconds, 0.0);
  }
  for (const void* out : inner.outs) EXPECT_TRUE(out == storage || out == host);
  EXPECT_GE(prof.total_seconds(), 0.0);
}

// The rest of the interface (ForwardingBackend) reaches the wrapped backend unchanged, answers included,
// and untimed: no synchronize() around a transfer, which must overlap the ops around it.
TEST(ProfilingBackend, ForwardsMemoryTransfersAndTheCommunicatorUntimed) {
  RecordingBackend inner;
  ProfilingBackend prof(inner);
  EXPECT_EQ(prof.workspace_bytes(), 12345u);
  const std::optional<DeviceMemoryUse> memory = prof.device_memory();
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ(memory->held, 111u);
  EXPECT_EQ(memory->used, 222u);
  EXPECT_EQ(memory->total, 333u);
  void* block = prof.allocate(32);
  prof.deallocate(block);
  void* pinned = prof.allocate_pinned(sizeof(inner.pinned));
  EXPECT_EQ(pinned, inner.pinned);
  char device[16] = "weights", host[16] = {};
  EXPECT_EQ(prof.transfer_to_host(host, device, sizeof(host)), 41u);
  EXPECT_STREQ(host, "weights");
  EXPECT_EQ(prof.transfer_to_device(pinned, host, sizeof(host)), 42u);
  prof.wait_transfer(42);
  prof.order_after_transfers();
  prof.deallocate_pinned(pinned);
  SingleCommunicator comm;
  EXPECT_EQ(prof.make_communicator(comm), nullptr);

  const std::vector<std::string> expected = {"allocate", "deallocate", "allocate_pinned", "transfer_to_host",
                                             "transfer_to_device", "wait_transfer 42", "order_after_transfers",
                                             "deallocate_pinned", "make_communicator"};
  EXPECT_EQ(inner.log, expected);
  const std::vector<const void*> targets = {block, block, pinned, host, pinned, nullptr, nullptr, pinned, &comm};
  EXPECT_EQ(inner.outs, targets);
  EXPECT_EQ(prof.total_seconds(), 0.0);
}

TEST(ProfilingBackend, SumsCategoriesAndGemmShapes) {
  RecordingBackend inner;
  ProfilingBackend prof(inner);
  float a[6 * 4] = {}, b[4 * 5] = {}, out[6 * 5] = {};
  const Tensor ta(a, {2, 3, 4}), tb(b, {5, 4}), tout(out, {2, 3, 5});
  prof.matmul({tout, ta, tb, Tensor(), false, true});
  prof.matmul({tout, ta, tb, Tensor(), false, true});
  prof.matmul({Tensor(b, {4, 5}), Tensor(a, {6, 4}), Tensor(out, {6, 5}), Tensor(), true, false});
  prof.gelu_forward({ta, ta});
  prof.gelu_backward({ta, ta, ta});
  prof.cross_entropy(CrossEntropyArgs{});

  ASSERT_EQ(prof.matmul_shapes().size(), 2u);
  const MatmulShapeTiming& s0 = prof.matmul_shapes()[0];
  EXPECT_EQ(std::tie(s0.m, s0.n, s0.k, s0.trans_a, s0.trans_b, s0.calls), std::make_tuple(6, 5, 4, false, true, 2));
  EXPECT_DOUBLE_EQ(s0.flops(), 2.0 * 6 * 5 * 4 * 2);
  const MatmulShapeTiming& s1 = prof.matmul_shapes()[1];
  EXPECT_EQ(std::tie(s1.m, s1.n, s1.k, s1.trans_a, s1.trans_b, s1.calls), std::make_tuple(4, 5, 6, true, false, 1));

  EXPECT_EQ(prof.category_timing(OpCategory::Matmul).calls, 3);
  EXPECT_EQ(prof.category_timing(OpCategory::Gelu).calls, 2);
  EXPECT_EQ(prof.category_timing(OpCategory::Softmax).calls, 1);
  EXPECT_EQ(prof.category_timing(OpCategory::Attention).calls, 0);
  EXPECT_STREQ(op_category_name(OpCategory::Softmax), "cross-entropy/softmax");
  // Each call's traffic (backend/op_traffic.h) is added to its op and its category.
  EXPECT_DOUBLE_EQ(prof.timing(ProfiledOp::GeluForward).bytes, 2.0 * ta.bytes());
  EXPECT_DOUBLE_EQ(prof.category_timing(OpCategory::Gelu).bytes, 5.0 * ta.bytes());
  EXPECT_DOUBLE_EQ(prof.category_timing(OpCategory::Matmul).bytes,
                   3.0 * static_cast<double>(ta.bytes() + tb.bytes() + tout.bytes()));
  EXPECT_EQ(prof.timing(ProfiledOp::CrossEntropy).bytes, 0.0);  // every tensor empty

  prof.reset();
  EXPECT_EQ(prof.category_timing(OpCategory::Matmul).calls, 0);
  EXPECT_EQ(prof.category_timing(OpCategory::Matmul).bytes, 0.0);
  EXPECT_EQ(prof.matmul_shapes()[0].calls, 0);
  EXPECT_EQ(prof.total_seconds(), 0.0);

  prof.set_enabled(false);
  const size_t logged = inner.log.size();
  prof.matmul({tout, ta, tb, Tensor(), false, true});
  EXPECT_EQ(inner.log.size(), logged + 1) << "disabled: forwarded without synchronize";
  EXPECT_EQ(prof.timing(ProfiledOp::Matmul).calls, 0);
  EXPECT_EQ(prof.timing(ProfiledOp::Matmul).bytes, 0.0);
}

struct StepOutputs {
  double loss = 0.0, norm2 = 0.0;
  std::vector<float> params;
};

StepOutputs train_step(Backend& backend, const ModelConfig& m, int B, int T, const LoraSpec& lora = {}) {
  GPT model(m, B, T, backend, DType::F32, {}, {}, lora);
  model.init_weights(7);
  std::vector<int32_t> tokens(static_cast<size_t>(B) * T), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 3) % m.vocab_size);
    targets[i] = static_cast<int32_t>((i * 5 + 1) % m.vocab_size);
  }
  const StepContext ctx{1, 0, 0, true};
  model.zero_grads();
  model.forward(tokens, targets, B, T, ctx, 1.0f / static_cast<float>(tokens.size()));
  StepOutputs out;
  out.loss = model.loss_sum();
  model.backward(ctx);
  out.norm2 = model.gradient_norm_squared();
  out.params = model.parameters_to_host();
  return out;
}

TEST(ProfilingBackend, ModelThroughItMatchesTheBareBackendBitwise) {
  const ModelConfig m = test::tiny_model(11, 2, 8, 2, 8);
  cpu::CpuBackend cpu;
  const StepOutputs bare = train_step(cpu, m, 2, 8);
  ProfilingBackend prof(cpu);
  const StepOutputs profiled = train_step(prof, m, 2, 8);
  EXPECT_EQ(bare.loss, profiled.loss);
  EXPECT_EQ(bare.norm2, profiled.norm2);
  EXPECT_EQ(bare.params, profiled.params);
  EXPECT_GT(prof.timing(ProfiledOp::Matmul).calls, 0);
  EXPECT_EQ(prof.timing(ProfiledOp::AttentionForward).calls, m.n_layer);
  // Every op a step issued moved bytes; the host copies count none (the bus is not the memory's bandwidth).
  for (int o = 0; o < kNumProfiledOps; ++o) {
    const auto op = static_cast<ProfiledOp>(o);
    const OpTiming& t = prof.timing(op);
    if (op == ProfiledOp::CopyToDevice || op == ProfiledOp::CopyToHost) {
      EXPECT_EQ(t.bytes, 0.0) << profiled_op_name(op);
    } else if (t.calls > 0) {
      EXPECT_GT(t.bytes, 0.0) << profiled_op_name(op);
    }
  }
  EXPECT_GT(prof.timing(ProfiledOp::CopyToDevice).calls, 0);
}

// The GEMMs a forward + backward issues are the ones bench::model_gemm_shapes lists, call for call.
TEST(ProfilingBackend, ModelIssuesTheGemmShapesTheBenchMeasures) {
  const ModelConfig m = test::tiny_model(11, 2, 8, 2, 8);
  const int B = 2, T = 8;
  cpu::CpuBackend cpu;
  ProfilingBackend prof(cpu);
  train_step(prof, m, B, T);

  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool>, int64_t> issued, listed;
  for (const MatmulShapeTiming& s : prof.matmul_shapes()) issued[{s.m, s.n, s.k, s.trans_a, s.trans_b}] += s.calls;
  for (const bench::GemmShape& s : bench::model_gemm_shapes(m, B, T, 1))
    listed[{s.m, s.n, s.k, s.trans_a, s.trans_b}] += s.per_step;
  EXPECT_EQ(issued, listed);
}

// Under LoRA, with adapter dropout (the backward's other path): no dW for the frozen weights, and each
// adapted layer's adapter products, call for call; and the FLOPs the model counts for them are those
// shapes' FLOPs (bench's hardware line).
TEST(ProfilingBackend, LoraModelIssuesTheGemmShapesTheBenchMeasures) {
  const ModelConfig m = test::tiny_model(11, 2, 12, 2, 8);
  const int B = 2, T = 8;
  LoraSpec lora;
  lora.rank = 3;
  lora.dropout = 0.1;
  lora.targets = {true, false, true, true};
  cpu::CpuBackend cpu;
  ProfilingBackend prof(cpu);
  train_step(prof, m, B, T, lora);

  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool>, int64_t> issued, listed;
  for (const MatmulShapeTiming& s : prof.matmul_shapes()) issued[{s.m, s.n, s.k, s.trans_a, s.trans_b}] += s.calls;
  double listed_flops = 0.0;
  for (const bench::GemmShape& s : bench::model_gemm_shapes(m, B, T, 1, lora)) {
    listed[{s.m, s.n, s.k, s.trans_a, s.trans_b}] += s.per_step;
    listed_flops += s.flops() * static_cast<double>(s.per_step);
  }
  EXPECT_EQ(issued, listed);
  double issued_flops = 0.0;
  for (const MatmulShapeTiming& s : prof.matmul_shapes()) issued_flops += s.flops();
  EXPECT_DOUBLE_EQ(issued_flops, listed_flops);
}

}  // namespace
}  // namespace gpt

#include "backend/profiling_backend.h"

#include "backend/op_traffic.h"
#include "core/error.h"

#include <ctime>

namespace gpt {
namespace {

struct OpInfo {
  const char* name;
  OpCategory category;
};

// Indexed by ProfiledOp.
constexpr std::array<OpInfo, kNumProfiledOps> kOps = {{
#define GPT_PROFILED_OP_INFO(method, Args, op, category) {#method, OpCategory::category},
    GPT_BACKEND_OPS(GPT_PROFILED_OP_INFO)
#undef GPT_PROFILED_OP_INFO
    {"copy_to_device", OpCategory::Other},
    {"copy_to_host", OpCategory::Other},
}};

// A tensor as the matrix the op sees: leading dimensions folded into rows.
void matrix_dims(const Tensor& t, int64_t& rows, int64_t& cols) {
  cols = t.ndim >= 1 ? t.dim(-1) : 0;
  rows = cols > 0 ? t.numel() / cols : 0;
}

}  // namespace

const char* op_category_name(OpCategory category) {
  switch (category) {
    case OpCategory::Matmul: return "matrix products";
    case OpCategory::Attention: return "attention";
    case OpCategory::LayerNorm: return "layernorm";
    case OpCategory::Gelu: return "GELU";
    case OpCategory::Softmax: return "cross-entropy/softmax";
    case OpCategory::Optimizer: return "optimizer";
    case OpCategory::Embedding: return "embedding";
    case OpCategory::Residual: return "residual";
    case OpCategory::Other: return "other";
  }
  return "?";
}

const char* profiled_op_name(ProfiledOp op) { return kOps[static_cast<size_t>(op)].name; }
OpCategory profiled_op_category(ProfiledOp op) { return kOps[static_cast<size_t>(op)].category; }

ProfilingBackend::ProfilingBackend(Backend& inner) : ForwardingBackend(inner) { shapes_.reserve(64); }

void ProfilingBackend::reset() {
  ops_.fill(OpTiming{});
  for (MatmulShapeTiming& s : shapes_) {
    s.calls = 0;
    s.seconds = 0.0;
  }
}

OpTiming ProfilingBackend::category_timing(OpCategory category) const {
  OpTiming total;
  for (int i = 0; i < kNumProfiledOps; ++i) {
    if (kOps[static_cast<size_t>(i)].category != category) continue;
    total.calls += ops_[static_cast<size_t>(i)].calls;
    total.seconds += ops_[static_cast<size_t>(i)].seconds;
    total.cpu_seconds += ops_[static_cast<size_t>(i)].cpu_seconds;
    total.bytes += ops_[static_cast<size_t>(i)].bytes;
  }
  return total;
}

double ProfilingBackend::total_seconds() const {
  double total = 0.0;
  for (const OpTiming& t : ops_) total += t.seconds;
  return total;
}

double ProfilingBackend::process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

template <class F>
double ProfilingBackend::timed(ProfiledOp op, F&& f) {
  if (!enabled_) {
    f();
    return 0.0;
  }
  inner().synchronize();
  const double cpu_start = process_cpu_seconds();
  const Clock::time_point start = Clock::now();
  f();
  inner().synchronize();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  OpTiming& t = ops_[static_cast<size_t>(op)];
  ++t.calls;
  t.seconds += seconds;
  t.cpu_seconds += process_cpu_seconds() - cpu_start;
  return seconds;
}

void ProfilingBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  timed(ProfiledOp::CopyToDevice, [&] { inner().copy_to_device(dst, host_src, bytes); });
}
void ProfilingBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  timed(ProfiledOp::CopyToHost, [&] { inner().copy_to_host(host_dst, src, bytes); });
}

// Every op: timed, its traffic added, and a matmul's shape tallied.
#define GPT_PROFILE_BACKEND_OP(method, Args, op, category)                       \
  void ProfilingBackend::method(const Args& args) {                              \
    const double seconds = timed(ProfiledOp::op, [&] { inner().method(args); });  \
    add_traffic(ProfiledOp::op, op_traffic_bytes(args));                         \
    record_shape(args, seconds);                                                 \
  }
GPT_BACKEND_OPS(GPT_PROFILE_BACKEND_OP)
#undef GPT_PROFILE_BACKEND_OP

void ProfilingBackend::add_traffic(ProfiledOp op, uint64_t bytes) {
  if (enabled_) ops_[static_cast<size_t>(op)].bytes += static_cast<double>(bytes);
}

void ProfilingBackend::record_shape(const MatmulArgs& args, double seconds) {
  if (!enabled_) return;
  int64_t a_rows, a_cols, b_rows, b_cols;
  matrix_dims(args.a, a_rows, a_cols);
  matrix_dims(args.b, b_rows, b_cols);
  MatmulShapeTiming key;
  key.m = args.trans_a ? a_cols : a_rows;
  key.k = args.trans_a ? a_rows : a_cols;
  key.n = args.trans_b ? b_rows : b_cols;
  key.trans_a = args.trans_a;
  key.trans_b = args.trans_b;
  for (MatmulShapeTiming& s : shapes_) {
    if (s.m == key.m && s.n == key.n && s.k == key.k && s.trans_a == key.trans_a && s.trans_b == key.trans_b) {
      ++s.calls;
      s.seconds += seconds;
      return;
    }
  }
  key.calls = 1;
  key.seconds = seconds;
  shapes_.push_back(key);
}

}  // namespace gpt

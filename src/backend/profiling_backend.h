// ProfilingBackend: wraps any Backend, forwards every call unchanged and adds up the wall time of each
// op, so a benchmark can say where a step's time goes without touching the model. Each timed op is
// bracketed by synchronize() on the wrapped backend, so on an asynchronous backend the time of an op is
// the op's own (at the price of draining the queue around every op; on the CPU synchronize is free).
// Each op also adds up its memory traffic (backend/op_traffic.h: the bytes of its tensors), which a
// benchmark sets beside the time those bytes take at the measured bandwidth. Matrix products are also
// tallied per shape (m, n, k, transposes), which is how achieved GEMM rates are compared with the peak at
// the same shapes.
//
// Besides wall time each op records the process's CPU time (all threads) spent while it ran: on a
// machine shared with other work, wall time well above CPU time / threads means the op waited for a core.
// Everything else is forwarded untimed (ForwardingBackend): memory management happens outside the step,
// and the copy stream's transfers (memory.offload's pipeline) overlap the ops around them, which bracketing
// them with synchronize() would serialise. Host copies are timed under "other". Not thread-safe: one
// thread issues ops, as the model does.
#pragma once

#include "backend/forwarding_backend.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

enum class OpCategory { Matmul, Attention, LayerNorm, Gelu, Softmax, Optimizer, Embedding, Residual, Other };
inline constexpr int kNumOpCategories = 9;
// "matrix products", "attention", "layernorm", "GELU", "cross-entropy/softmax", "optimizer",
// "embedding", "residual", "other".
const char* op_category_name(OpCategory category);

// Every timed call of the Backend interface.
enum class ProfiledOp {
#define GPT_PROFILED_OP(method, Args, op, category) op,
  GPT_BACKEND_OPS(GPT_PROFILED_OP)
#undef GPT_PROFILED_OP
  CopyToDevice,
  CopyToHost,
  Count
};
inline constexpr int kNumProfiledOps = static_cast<int>(ProfiledOp::Count);
const char* profiled_op_name(ProfiledOp op);  // the Backend method's name, e.g. "layernorm_forward"
OpCategory profiled_op_category(ProfiledOp op);

struct OpTiming {
  int64_t calls = 0;
  double seconds = 0.0;      // wall time
  double cpu_seconds = 0.0;  // CPU time of the whole process meanwhile
  double bytes = 0.0;        // the calls' memory traffic (backend/op_traffic.h); 0 for host copies
};

// One GEMM shape as the op sees it: out[m,n] = op(a)[m,k] op(b)[k,n].
struct MatmulShapeTiming {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t calls = 0;
  double seconds = 0.0;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(calls);
  }
};

class ProfilingBackend final : public ForwardingBackend {
 public:
  explicit ProfilingBackend(Backend& inner);

  // Zeroes every counter; the shape table keeps its storage, so timed steps do not allocate.
  void reset();
  // While disabled, ops are forwarded without timing or counting.
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }

  const OpTiming& timing(ProfiledOp op) const { return ops_[static_cast<size_t>(op)]; }
  OpTiming category_timing(OpCategory category) const;
  const std::vector<MatmulShapeTiming>& matmul_shapes() const { return shapes_; }
  double total_seconds() const;  // wall time of all timed ops

  // CPU time of the whole process so far (CLOCK_PROCESS_CPUTIME_ID), in seconds.
  static double process_cpu_seconds();

  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  GPT_BACKEND_OPS(GPT_OVERRIDE_BACKEND_OP)

 private:
  using Clock = std::chrono::steady_clock;

  // Adds an op's memory traffic to its counter while enabled.
  void add_traffic(ProfiledOp op, uint64_t bytes);
  // The shape tally of a matmul that took `seconds`; other ops have none.
  void record_shape(const MatmulArgs& args, double seconds);
  template <class Args>
  void record_shape(const Args&, double) {}
  // Runs f between two synchronize() calls and charges the time to op; returns the seconds.
  template <class F>
  double timed(ProfiledOp op, F&& f);

  bool enabled_ = true;
  std::array<OpTiming, kNumProfiledOps> ops_{};
  std::vector<MatmulShapeTiming> shapes_;
};

}  // namespace gpt

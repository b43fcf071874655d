// The Backend interface: one method per op, each taking its argument struct. The model, trainer and
// optimizer are written once against this class; the CPU backend (src/cpu) and the CUDA backend
// (cuda/) implement it. Nothing above this interface asks which backend it runs on.
#pragma once

#include "backend/op_args.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace gpt {

class Communicator;  // dist/communicator.h

// Every compute op of the interface, once: X(method, argument struct, ProfiledOp enumerator, OpCategory
// the benchmark reports it under). The interface, the backends' declarations and the profiling wrapper
// are generated from this list, so an op is added in one place (plus its implementations).
#define GPT_BACKEND_OPS(X) \
  X(fill, FillArgs, Fill, Other) \
  X(copy, CopyArgs, Copy, Other) \
  X(matmul, MatmulArgs, Matmul, Matmul) \
  X(bias_backward, BiasBackwardArgs, BiasBackward, Other) \
  X(layernorm_forward, LayerNormForwardArgs, LayerNormForward, LayerNorm) \
  X(layernorm_backward, LayerNormBackwardArgs, LayerNormBackward, LayerNorm) \
  X(residual_layernorm_forward, ResidualLayerNormForwardArgs, ResidualLayerNormForward, LayerNorm) \
  X(layernorm_residual_backward, LayerNormResidualBackwardArgs, LayerNormResidualBackward, LayerNorm) \
  X(attention_forward, AttentionForwardArgs, AttentionForward, Attention) \
  X(attention_backward, AttentionBackwardArgs, AttentionBackward, Attention) \
  X(attention_decode, AttentionDecodeArgs, AttentionDecode, Attention) \
  X(softmax_forward, SoftmaxForwardArgs, SoftmaxForward, Softmax) \
  X(softmax_backward, SoftmaxBackwardArgs, SoftmaxBackward, Softmax) \
  X(gelu_forward, GeluForwardArgs, GeluForward, Gelu) \
  X(gelu_backward, GeluBackwardArgs, GeluBackward, Gelu) \
  X(residual_forward, ResidualForwardArgs, ResidualForward, Residual) \
  X(residual_backward, ResidualBackwardArgs, ResidualBackward, Residual) \
  X(embedding_forward, EmbeddingForwardArgs, EmbeddingForward, Embedding) \
  X(embedding_backward, EmbeddingBackwardArgs, EmbeddingBackward, Embedding) \
  X(cross_entropy, CrossEntropyArgs, CrossEntropy, Softmax) \
  X(adamw_update, AdamWArgs, AdamWUpdate, Optimizer) \
  X(sum_of_squares, SumOfSquaresArgs, SumOfSquares, Optimizer) \
  X(cast, CastArgs, Cast, Other) \
  X(amax, AmaxArgs, Amax, Other) \
  X(quantize_roundtrip, QuantizeRoundtripArgs, QuantizeRoundtrip, Other) \
  X(fp8_current_scale, Fp8CurrentScaleArgs, Fp8CurrentScale, Other)

// In a backend's class: the override of every op.
#define GPT_OVERRIDE_BACKEND_OP(method, Args, op, category) void method(const Args& args) override;

// What a backend does that the planner and the model must know; a wrapper forwards the struct whole.
struct BackendCapabilities {
  // Whether attention_forward materialises the [B,NH,T,T] probabilities for backward. A fused
  // (flash-style) attention keeps only O(T) statistics, and the memory planner must not count scores.
  bool attention_keeps_probs = true;
  // Whether the bf16/fp16/fp8 recipes' tensors take their narrow size here: the memory planner lowers
  // the precision to fit a budget only where that saves memory. Every backend stores tensors in their
  // own format (the CPU too, since tensors carry it), so this is true unless a backend says otherwise.
  bool stores_low_precision = true;
  // Device bytes the backend holds for itself from its construction on, outside the arenas (a GPU's
  // matrix-product workspace and op scratch): the memory plan adds them to what the arenas take.
  size_t reserved_device_bytes = 0;
  // Whether a matrix product of one row takes any pair of operand formats (F32 x BF16, E4M3 x E4M3, ...)
  // into any output format. The KV-cache decoder multiplies one position's row in the formats the recipe
  // gives each tensor (F32 probabilities times BF16 values, 1-row FP8 products); a backend whose products
  // are limited to some pairings and shapes decodes the narrow recipes by rerunning the window instead.
  // The CPU multiplies any formats at any size; the CUDA backend sends the few-row products cuBLASLt
  // cannot take to its own kernel (cuda/gemm/row_product.cu).
  bool one_row_products_of_any_formats = false;
  // Bytes the backend holds for matrix products with narrow (BF16, F16, FP8) operands once a recipe has
  // them, on top of reserved_device_bytes (the CPU's decode workspace): the plan adds them to a run whose
  // compute format is narrow.
  size_t narrow_matmul_workspace_bytes = 0;
  // Whether the backend's device memory is the host's RAM (the CPU): then moving state to the host
  // (memory.offload) frees nothing, the budget planner does not choose it, and the machine's memory check
  // adds the ledger's device and host columns.
  bool device_memory_is_host = false;
  // Whether FP8 products take transposed or widened copies of their operands in MatmulArgs::staging
  // (backend/matmul_staging.h: cuBLASLt multiplies FP8 only in the TN layout, and 16-bit x FP8 not at all):
  // the activation plan then holds a staging buffer for the model's largest product.
  bool stages_fp8_operands = false;
  // Whether allocate_pinned gives page-locked host memory, which the device reads and writes by DMA while
  // it computes (a GPU's cudaHostAlloc); memory.offload keeps the host state that crosses the bus there.
  bool pinned_host_memory = false;
  // Why the backend cannot multiply FP8 operands (the fp8 recipe's linear layers), or "" where it can: the
  // CPU computes them exactly in software; a GPU needs FP8 tensor cores (compute capability 8.9). A run
  // whose recipe has FP8 products then stops at start (PrecisionRecipe::check_fp8_products), not at its
  // first product.
  std::string fp8_products_unavailable;
  // The multiple of which FP8 products need their widths N and K (cuBLASLt's 16; 1 for any): a model's
  // linear widths (n_embd, 3 n_embd, 4 n_embd) off it stop a run with FP8 products at start. Rows are
  // not bound by it (cuda/gemm/matmul.cpp makes up for them).
  int fp8_width_multiple = 1;
};

// A device's memory as the backend sees it now. held: the bytes the backend allocated (the arenas and
// what it reserved for itself), which the ledger plans and which do not change inside a step. used and
// total: the device's own count (cudaMemGetInfo), which adds the driver's context, the kernels' code as
// the runtime loads it, the libraries' state and any other process on the device.
struct DeviceMemoryUse {
  uint64_t held = 0;
  uint64_t used = 0;
  uint64_t total = 0;
};

// Every virtual is pure, defaults included (HostMemoryBackend below has those of a backend on host memory),
// so a wrapper that passes calls on (backend/forwarding_backend.h) does not compile until it forwards a
// new one: a virtual with a default here would silently skip the wrapped backend.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  virtual BackendCapabilities capabilities() const = 0;
  bool attention_keeps_probs() const { return capabilities().attention_keeps_probs; }
  bool stores_low_precision() const { return capabilities().stores_low_precision; }
  // The bytes the backend holds for itself now, outside the arenas: what the first step's memory check
  // sets beside the ledger's backend workspace.
  virtual size_t workspace_bytes() const = 0;
  // nullopt where the backend's device memory is the host's (the process's resident set measures it).
  virtual std::optional<DeviceMemoryUse> device_memory() const = 0;

  // Memory: the arenas are the only callers of allocate/deallocate.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;

  // Pinned host memory (capabilities().pinned_host_memory): nullptr where the backend has none to give or
  // the allocation failed, and the caller uses ordinary memory instead.
  virtual void* allocate_pinned(size_t bytes) = 0;
  virtual void deallocate_pinned(void* ptr) = 0;
  // Transfers on a copy stream of their own (memory.offload's pipeline). Each starts once every op queued
  // before it has run and overlaps the ops queued after it, which must leave its memory alone; it returns
  // a ticket. wait_transfer(t) blocks the host until transfer t and every transfer before it are done.
  // Ops queued after order_after_transfers() run after every transfer queued before it, and the host does
  // not wait.
  virtual uint64_t transfer_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual uint64_t transfer_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void wait_transfer(uint64_t ticket) = 0;
  virtual void order_after_transfers() = 0;

  // Data parallelism: the communicator for this backend's buffers (NCCL for CUDA), started over `host`, the
  // job's communicator on host memory (MPI), which outlives it. nullptr: `host` itself serves this
  // backend, whose buffers are host memory.
  virtual std::unique_ptr<Communicator> make_communicator(Communicator& host) = 0;

  // The ops (GPT_BACKEND_OPS): one virtual per argument struct of op_args.h; the mixed-precision
  // conversions cast, amax and quantize_roundtrip are in src/cpu/cast.cpp on the CPU.
#define GPT_DECLARE_BACKEND_OP(method, Args, op, category) virtual void method(const Args& args) = 0;
  GPT_BACKEND_OPS(GPT_DECLARE_BACKEND_OP)
#undef GPT_DECLARE_BACKEND_OP
};

// A backend whose buffers are host memory (the CPU's, a test's): it holds nothing outside the arenas but
// what its capabilities reserve, has no pinned memory to give, its transfers are copies done when they
// return, and the job's host communicator serves its buffers.
class HostMemoryBackend : public Backend {
 public:
  size_t workspace_bytes() const override { return capabilities().reserved_device_bytes; }
  std::optional<DeviceMemoryUse> device_memory() const override { return std::nullopt; }
  void* allocate_pinned(size_t) override { return nullptr; }
  void deallocate_pinned(void*) override {}
  uint64_t transfer_to_host(void* host_dst, const void* src, size_t bytes) override {
    copy_to_host(host_dst, src, bytes);
    return 0;
  }
  uint64_t transfer_to_device(void* dst, const void* host_src, size_t bytes) override {
    copy_to_device(dst, host_src, bytes);
    return 0;
  }
  void wait_transfer(uint64_t) override {}
  void order_after_transfers() override {}
  std::unique_ptr<Communicator> make_communicator(Communicator& host) override;
};

enum class BackendKind { Auto, Cpu, Cuda };

// How a backend is set up, from the configuration.
// The CUDA backend's attention (train.attention): fused keeps each row's log-sum-exp instead of the
// [B,NH,T,T] probabilities; materialised keeps them (the CPU's way; kept for checks and comparisons).
enum class AttentionKind { Fused, Materialised };
AttentionKind parse_attention_kind(const std::string& name);

struct BackendOptions {
  int threads = 0;          // CPU: OpenMP threads; <= 0 lets OpenMP decide
  bool allow_tf32 = false;  // CUDA: FP32 matrix products on TF32 tensor cores (precision.tf32)
  AttentionKind attention = AttentionKind::Fused;  // CUDA; the CPU always materialises
  int local_rank = -1;      // CUDA: this rank's index among its node's ranks (< 0: the launcher's variable)
  bool cpu_exact_narrow_matmul = false;  // CPU: narrow products decoded to FP32 for OpenBLAS, never oneDNN (precision.cpu_narrow_matmul)
};

// "auto" picks CUDA when this build has it and a device is present, else the CPU.
std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options = {});
BackendKind parse_backend_kind(const std::string& name);

}  // namespace gpt

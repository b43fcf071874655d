#include "backend/cuda_backend.h"
#include "backend/device_support.h"

#include "common/cuda_check.h"
#include "gemm/matmul.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/attention_decode.h"
#include "kernels/cast.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/fill_copy.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/reduce.h"
#include "kernels/residual.h"
#include "kernels/softmax.h"

#include <cstdlib>
#include <cstring>

namespace gpt::cuda {
namespace {

// The scratch the ops may use (cuda/common/device_context.h): the largest user is the embedding
// backward's token buckets, 12 bytes per token of a micro-batch plus 4 per vocabulary row
// (GPT-2 at B=16, T=1024: under 0.5 MiB).
constexpr size_t kScratchBytes = size_t{8} << 20;

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

std::string gib(size_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

}  // namespace

int local_device_index(int device_count, int local_rank) {
  GPT_CHECK(device_count > 0, "no CUDA device to choose from");
  if (local_rank >= 0) return local_rank % device_count;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v) % device_count;
  }
  return 0;
}

CudaBackend::CudaBackend(int device_index, bool allow_tf32, AttentionKind attention) : attention_(attention) {
  CUDA_CHECK(cudaSetDevice(device_index));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_index));
  info_ = {device_index, prop.name, prop.totalGlobalMem, prop.major * 10 + prop.minor, prop.multiProcessorCount};
  CUDA_CHECK(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&compute_mark_, cudaEventDisableTiming));
  gemm_ = std::make_unique<Gemm>(info_.compute_capability);
  gemm_->set_allow_tf32(allow_tf32);
  ctx_.gemm = gemm_.get();
  // One allocation: the ops' scratch, then the bad-input record.
  CUDA_CHECK(cudaMalloc(&ctx_.scratch, kScratchBytes + sizeof(InputErrors)));
  ctx_.scratch_bytes = kScratchBytes;
  ctx_.input_errors = reinterpret_cast<InputErrors*>(static_cast<char*>(ctx_.scratch) + kScratchBytes);
  const InputErrors none;
  CUDA_CHECK(cudaMemcpy(ctx_.input_errors, &none, sizeof none, cudaMemcpyHostToDevice));
  ctx_.sm_count = info_.sm_count;
  ctx_.compute_capability = info_.compute_capability;
  ctx_.shared_per_block_optin = prop.sharedMemPerBlockOptin;
  sync_each_op_ = env_flag("GPT_CUDA_SYNC");
}

CudaBackend::~CudaBackend() {
  // Destructors must not throw: a failure here (a device already in an error state) is ignored.
  cudaStreamSynchronize(ctx_.stream);
  cudaStreamSynchronize(copy_stream_);
  for (const Transfer& t : in_flight_) cudaEventDestroy(t.landed);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  cudaEventDestroy(compute_mark_);
  cudaStreamDestroy(copy_stream_);
  gemm_.reset();
  cudaFree(ctx_.scratch);
  cudaStreamDestroy(ctx_.stream);
}

BackendCapabilities CudaBackend::capabilities() const {
  BackendCapabilities caps;
  // Fused: kernels/flash_attention.cu keeps each row's log-sum-exp; materialised: kernels/attention.cu.
  caps.attention_keeps_probs = attention_ == AttentionKind::Materialised;
  caps.stores_low_precision = true;
  caps.reserved_device_bytes = reserved_bytes();
  // cuBLASLt's FP8 products: TN only, no 16-bit x FP8, widths in multiples of 16 (cuda/gemm/matmul.cpp).
  caps.stages_fp8_operands = true;
  caps.fp8_width_multiple = 16;
  // The decoder's one-row products of mixed formats: cuda/gemm/row_product.cu.
  caps.one_row_products_of_any_formats = true;
  caps.pinned_host_memory = true;
  if (info_.compute_capability < kMinFp8ComputeCapability)
    caps.fp8_products_unavailable =
        fmt::format("device {} ({}, compute capability {}) has no FP8 tensor cores, which need compute capability {} "
                    "or later (Ada, Hopper, Blackwell)",
                    info_.index, info_.name, compute_capability_text(info_.compute_capability),
                    compute_capability_text(kMinFp8ComputeCapability));
  return caps;
}

size_t CudaBackend::reserved_bytes() const {
  return ctx_.scratch_bytes + sizeof(InputErrors) + gemm_->device_bytes();
}

std::optional<DeviceMemoryUse> CudaBackend::device_memory() const {
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return DeviceMemoryUse{allocated_bytes_ + reserved_bytes(), total - free, total};
}

void* CudaBackend::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    GPT_FAIL("cudaMalloc of {} ({} bytes) failed on device {} ({}): {}; {} of {} free, {} held by this run's arenas",
             gib(bytes), bytes, info_.index, info_.name, cudaGetErrorString(status), gib(free), gib(total),
             gib(allocated_bytes_ + reserved_bytes()));
  }
  allocated_bytes_ += bytes;
  sizes_[p] = bytes;
  return p;
}

void CudaBackend::deallocate(void* ptr) {
  if (!ptr) return;
  // Not synchronize(): an arena's destructor lands here, and a bad-input report must not throw from it.
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  if (auto it = sizes_.find(ptr); it != sizes_.end()) {
    allocated_bytes_ -= it->second;
    sizes_.erase(it);
  }
  CUDA_CHECK(cudaFree(ptr));
}

void* CudaBackend::allocate_pinned(size_t bytes) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();  // not sticky: the caller falls back to ordinary memory and says so
    return nullptr;
  }
  return p;
}

void CudaBackend::deallocate_pinned(void* ptr) {
  if (ptr) CUDA_CHECK(cudaFreeHost(ptr));
}

uint64_t CudaBackend::queue_transfer(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  // Re-recording compute_mark_ is safe: a stream's wait takes the event as it is when the wait is queued.
  CUDA_CHECK(cudaEventRecord(compute_mark_, ctx_.stream));
  CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, compute_mark_, 0));
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, copy_stream_));
  cudaEvent_t landed = nullptr;
  if (spare_events_.empty()) {
    CUDA_CHECK(cudaEventCreateWithFlags(&landed, cudaEventDisableTiming));
  } else {
    landed = spare_events_.back();
    spare_events_.pop_back();
  }
  CUDA_CHECK(cudaEventRecord(landed, copy_stream_));
  in_flight_.push_back({++transfers_, landed});
  return transfers_;
}

uint64_t CudaBackend::transfer_to_host(void* host_dst, const void* src, size_t bytes) {
  return queue_transfer(host_dst, src, bytes, cudaMemcpyDeviceToHost);
}

uint64_t CudaBackend::transfer_to_device(void* dst, const void* host_src, size_t bytes) {
  return queue_transfer(dst, host_src, bytes, cudaMemcpyHostToDevice);
}

void CudaBackend::wait_transfer(uint64_t ticket) {
  GPT_CHECK(ticket <= transfers_, "wait_transfer: ticket {} was never issued (the last is {})", ticket, transfers_);
  // The copy stream runs in order, so transfer `ticket` landing means every earlier one has too.
  while (!in_flight_.empty() && in_flight_.front().ticket <= ticket) {
    if (in_flight_.front().ticket == ticket) CUDA_CHECK(cudaEventSynchronize(in_flight_.front().landed));
    spare_events_.push_back(in_flight_.front().landed);
    in_flight_.pop_front();
  }
}

void CudaBackend::order_after_transfers() {
  if (!in_flight_.empty()) CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, in_flight_.back().landed, 0));
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx_.stream));
  // The host buffer may be reused as soon as this returns.
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream));
  synchronize();
}

void CudaBackend::synchronize() {
  // The bad-input record rides along with the wait the caller asked for: one 32-byte copy, no sync of its own.
  CUDA_CHECK(cudaMemcpyAsync(&seen_errors_, ctx_.input_errors, sizeof seen_errors_, cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  report_input_errors();
}

void CudaBackend::report_input_errors() {
  const InputErrors found = seen_errors_;
  if (found.first_token == ~0ull && found.first_target == ~0ull) return;
  // Cleared first, so a caller that catches the error can go on with good inputs.
  const InputErrors none;
  seen_errors_ = none;
  CUDA_CHECK(cudaMemcpy(ctx_.input_errors, &none, sizeof none, cudaMemcpyHostToDevice));
  auto position = [](unsigned long long word) { return static_cast<int64_t>(word >> 32); };
  auto value = [](unsigned long long word) { return static_cast<int32_t>(static_cast<uint32_t>(word & 0xFFFFFFFFu)); };
  if (found.first_token != ~0ull) {
    GPT_FAIL("embedding_forward on the cuda backend: token id {} at position {} of the micro-batch (b * T + t) is "
             "outside the embedding's rows [0, {}); the row was NaN. Check that the data were tokenized for this "
             "model (data.tokenizer, model.vocab_size)",
             value(found.first_token), position(found.first_token), found.token_bound);
  }
  GPT_FAIL("cross_entropy on the cuda backend: target {} at position {} of the micro-batch (b * T + t) is outside "
           "[0, {}) and is not the ignore index -1; its loss was NaN. Check the data's targets and mask against "
           "model.vocab_size",
           value(found.first_target), position(found.first_target), found.target_bound);
}

void CudaBackend::after_op(const char* op) {
  if (!sync_each_op_) return;
  const cudaError_t status = cudaStreamSynchronize(ctx_.stream);
  if (status != cudaSuccess) {
    GPT_FAIL("CUDA error in op {} (GPT_CUDA_SYNC=1 synchronises after every op): {}", op, cudaGetErrorString(status));
  }
  synchronize();  // and a bad token or target is reported by the op that met it
}

void CudaBackend::matmul(const MatmulArgs& args) {
  gemm_->matmul(args, ctx_.stream);
  after_op("matmul");
}

#define GPT_CUDA_KERNEL_OP(method, Args, op, category) \
  void CudaBackend::method(const Args& args) {        \
    cuda::method(args, ctx_);                          \
    after_op(#method);                                 \
  }
GPT_CUDA_KERNEL_OP(fill, FillArgs, Fill, Other)
GPT_CUDA_KERNEL_OP(copy, CopyArgs, Copy, Other)
GPT_CUDA_KERNEL_OP(bias_backward, BiasBackwardArgs, BiasBackward, Other)
GPT_CUDA_KERNEL_OP(layernorm_forward, LayerNormForwardArgs, LayerNormForward, LayerNorm)
GPT_CUDA_KERNEL_OP(layernorm_backward, LayerNormBackwardArgs, LayerNormBackward, LayerNorm)
GPT_CUDA_KERNEL_OP(residual_layernorm_forward, ResidualLayerNormForwardArgs, ResidualLayerNormForward, LayerNorm)
GPT_CUDA_KERNEL_OP(layernorm_residual_backward, LayerNormResidualBackwardArgs, LayerNormResidualBackward, LayerNorm)
GPT_CUDA_KERNEL_OP(attention_forward, AttentionForwardArgs, AttentionForward, Attention)
GPT_CUDA_KERNEL_OP(attention_backward, AttentionBackwardArgs, AttentionBackward, Attention)
GPT_CUDA_KERNEL_OP(attention_decode, AttentionDecodeArgs, AttentionDecode, Attention)
GPT_CUDA_KERNEL_OP(softmax_forward, SoftmaxForwardArgs, SoftmaxForward, Softmax)
GPT_CUDA_KERNEL_OP(softmax_backward, SoftmaxBackwardArgs, SoftmaxBackward, Softmax)
GPT_CUDA_KERNEL_OP(gelu_forward, GeluForwardArgs, GeluForward, Gelu)
GPT_CUDA_KERNEL_OP(gelu_backward, GeluBackwardArgs, GeluBackward, Gelu)
GPT_CUDA_KERNEL_OP(residual_forward, ResidualForwardArgs, ResidualForward, Residual)
GPT_CUDA_KERNEL_OP(residual_backward, ResidualBackwardArgs, ResidualBackward, Residual)
GPT_CUDA_KERNEL_OP(embedding_forward, EmbeddingForwardArgs, EmbeddingForward, Embedding)
GPT_CUDA_KERNEL_OP(embedding_backward, EmbeddingBackwardArgs, EmbeddingBackward, Embedding)
GPT_CUDA_KERNEL_OP(cross_entropy, CrossEntropyArgs, CrossEntropy, Softmax)
GPT_CUDA_KERNEL_OP(adamw_update, AdamWArgs, AdamWUpdate, Optimizer)
GPT_CUDA_KERNEL_OP(sum_of_squares, SumOfSquaresArgs, SumOfSquares, Optimizer)
GPT_CUDA_KERNEL_OP(cast, CastArgs, Cast, Other)
GPT_CUDA_KERNEL_OP(amax, AmaxArgs, Amax, Other)
GPT_CUDA_KERNEL_OP(quantize_roundtrip, QuantizeRoundtripArgs, QuantizeRoundtrip, Other)
GPT_CUDA_KERNEL_OP(fp8_current_scale, Fp8CurrentScaleArgs, Fp8CurrentScale, Other)
#undef GPT_CUDA_KERNEL_OP

}  // namespace gpt::cuda

// The materialised attention when the scratch holds fewer heads than a sequence has: the products and
// copies run a chunk of heads at a time (here 2 of 3, so the last chunk is shorter), and must give what
// the one-chunk run gives. Called through the kernel family's functions with a DeviceContext of our own,
// whose scratch is small enough to force the chunks at a T the emulator runs quickly.
#include "kernels/attention.h"

#include "common/cuda_check.h"
#include "gemm/matmul.h"
#include "precision/float_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace gpt::cuda::test {
namespace {

constexpr int64_t B = 2, T = 40, NH = 3, hs = 8, C = NH * hs;

struct Buffer {
  void* data = nullptr;
  explicit Buffer(size_t bytes) { CUDA_CHECK(cudaMalloc(&data, bytes)); }
  ~Buffer() { cudaFree(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

std::vector<uint16_t> download_bf16(const Tensor& t) {
  std::vector<uint16_t> host(static_cast<size_t>(t.numel()));
  CUDA_CHECK(cudaMemcpy(host.data(), t.data, t.bytes(), cudaMemcpyDeviceToHost));
  return host;
}

struct Outputs {
  std::vector<uint16_t> out, dqkv;
};

Outputs run_attention(size_t scratch_bytes, const std::vector<uint16_t>& qkv_host, const std::vector<uint16_t>& dout_host) {
  Gemm gemm(90);
  Buffer scratch(scratch_bytes), qkv(qkv_host.size() * 2), dout(dout_host.size() * 2), out(B * T * C * 2),
      probs(B * NH * T * T * 4), dprobs(B * NH * T * T * 4), dqkv(qkv_host.size() * 2);
  CUDA_CHECK(cudaMemcpy(qkv.data, qkv_host.data(), qkv_host.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dout.data, dout_host.data(), dout_host.size() * 2, cudaMemcpyHostToDevice));
  DeviceContext ctx;
  ctx.gemm = &gemm;
  ctx.scratch = scratch.data;
  ctx.scratch_bytes = scratch_bytes;
  DropoutSpec dropout{0.2f, RngStream{99, 3, 0, 1, RngSite::AttentionProbs}};
  const Tensor tqkv(qkv.data, {B, T, 3 * C}, DType::BF16, Device::CUDA), tprobs(probs.data, {B, NH, T, T}, DType::F32, Device::CUDA);
  const Tensor tout(out.data, {B, T, C}, DType::BF16, Device::CUDA), tdout(dout.data, {B, T, C}, DType::BF16, Device::CUDA);
  const Tensor tdqkv(dqkv.data, {B, T, 3 * C}, DType::BF16, Device::CUDA);
  attention_forward({tout, tprobs, tqkv, static_cast<int>(NH), dropout}, ctx);
  attention_backward({tdqkv, Tensor(dprobs.data, {B, NH, T, T}, DType::F32, Device::CUDA), tdout, tqkv, tprobs,
                      static_cast<int>(NH), dropout},
                     ctx);
  CUDA_CHECK(cudaDeviceSynchronize());
  return {download_bf16(tout), download_bf16(tdqkv)};
}

TEST(CudaAttentionChunks, TwoHeadsAtATimeGiveWhatAllHeadsAtOnceGive) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<uint16_t> qkv(B * T * 3 * C), dout(B * T * C);
  for (auto& x : qkv) x = f64_to_bf16(u(rng));
  for (auto& x : dout) x = f64_to_bf16(u(rng));
  // Per head: P or dS split in two BF16 T x T copies (each rounded up to 256 bytes) and a T x hs F32 sum.
  const size_t two_heads = 2 * ((2 * T * T * 2 + 255) / 256 * 256) + 2 * T * hs * 4;
  const Outputs chunked = run_attention(two_heads, qkv, dout);
  const Outputs whole = run_attention(size_t{8} << 20, qkv, dout);
  // Each element is the same sum either way (the batch count only groups heads), so the results agree
  // to the output's rounding; on the emulator they are equal.
  const auto expect_close = [](const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    int differ = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double x = bf16_to_f32(a[i]), y = bf16_to_f32(b[i]);
      ASSERT_TRUE(std::isfinite(x)) << what << "[" << i << "] not written";
      if (std::fabs(x - y) > 1e-2 * (std::fabs(y) + 0.05) && differ++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: chunked " << x << ", whole " << y;
    }
  };
  expect_close(chunked.out, whole.out, "out");
  expect_close(chunked.dqkv, whole.dqkv, "dqkv");
}

TEST(CudaAttentionChunks, AScratchTooSmallForOneHeadFailsSayingSo) {
  std::vector<uint16_t> qkv(B * T * 3 * C, 0), dout(B * T * C, 0);
  try {
    run_attention(1024, qkv, dout);
    FAIL() << "a 1 KiB scratch was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scratch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt::cuda::test

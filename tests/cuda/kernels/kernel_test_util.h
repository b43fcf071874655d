// What the kernel tests of cuda/kernels share: a DeviceContext over emulated device memory (the backend's
// 8 MiB of scratch) with the current device's limits, as the backend fills them, and tensors of host
// values uploaded to the device.
#pragma once

#include "common/device_context.h"
#include "core/tensor.h"
#include "cuda/emu/emu_test_util.h"

#include <cstring>
#include <vector>

namespace gpt::cuda::test {

class KernelContext {
 public:
  KernelContext() : scratch_(size_t{8} << 20) {
    ctx_.scratch = scratch_.get();
    ctx_.scratch_bytes = scratch_.size();
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    ctx_.sm_count = prop.multiProcessorCount;
    ctx_.compute_capability = prop.major * 10 + prop.minor;
    ctx_.shared_per_block_optin = prop.sharedMemPerBlockOptin;
  }
  const DeviceContext& get() const { return ctx_; }

 private:
  DeviceArray<unsigned char> scratch_;
  DeviceContext ctx_;
};

// Device bytes viewed as a tensor of a shape and dtype.
class DeviceTensor {
 public:
  DeviceTensor(std::initializer_list<int64_t> dims, DType dtype) : tensor_(nullptr, dims, dtype, Device::CUDA),
                                                                   bytes_(std::max<size_t>(tensor_.bytes(), 1)) {
    tensor_.data = bytes_.get();
  }
  const Tensor& tensor() const { return tensor_; }
  void upload(const void* host) { CUDA_CHECK(cudaMemcpy(bytes_.get(), host, tensor_.bytes(), cudaMemcpyHostToDevice)); }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(tensor_.bytes());
    CUDA_CHECK(cudaMemcpy(host.data(), bytes_.get(), host.size(), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  Tensor tensor_;
  DeviceArray<unsigned char> bytes_;
};

}  // namespace gpt::cuda::test

#include "dist/communicator.h"

#include <utility>

namespace gpt {

CommHandle& CommHandle::operator=(CommHandle&& other) noexcept {
  if (this != &other) {
    comm_ = std::exchange(other.comm_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

void CommHandle::wait() {
  if (comm_ == nullptr) return;
  comm_->wait(id_);
  comm_ = nullptr;
}

bool CommHandle::test() {
  if (comm_ == nullptr) return true;
  if (!comm_->test(id_)) return false;
  comm_ = nullptr;
  return true;
}

bool Communicator::test(uint64_t) { GPT_FAIL("{} communicator: test() on a handle it did not make", name()); }

void Communicator::wait(uint64_t) { GPT_FAIL("{} communicator: wait() on a handle it did not make", name()); }

void Communicator::check_same_dtype(const char* op, const Tensor& a, const Tensor& b) const {
  GPT_CHECK(a.dtype == b.dtype, "{}: buffers of {} and {} (both must have one dtype)", op, dtype_name(a.dtype),
            dtype_name(b.dtype));
  GPT_CHECK(a.device == b.device, "{}: buffers on {} and {}", op, device_name(a.device), device_name(b.device));
}

void Communicator::check_scatter_shapes(const char* op, const Tensor& chunk, const Tensor& whole) const {
  check_same_dtype(op, chunk, whole);
  GPT_CHECK(whole.numel() == chunk.numel() * world_size(),
            "{}: the whole buffer has {} elements, expected {} chunks of {} = {}", op, whole.numel(), world_size(),
            chunk.numel(), chunk.numel() * world_size());
}

void Communicator::check_max_dtype(const char* op, const Tensor& buf) const {
  GPT_CHECK(buf.dtype == DType::I32, "{}: maxes i32 values, got {} (floats: map them to ordered integers, as "
            "DataParallel::all_reduce_max does)", op, dtype_name(buf.dtype));
}

}  // namespace gpt

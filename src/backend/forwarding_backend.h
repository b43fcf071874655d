// ForwardingBackend: passes every call of the Backend interface on to another backend, unchanged. A
// wrapper (ProfilingBackend, the tests' backends that change one thing a backend says of itself) derives
// from it and overrides only what it changes, so no call can be left behind: Backend's virtuals are all
// pure, and the static_assert below stops the build while one of them is not forwarded here.
#pragma once

#include "backend/backend.h"
#include "dist/communicator.h"

#include <string>
#include <type_traits>

namespace gpt {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}

  Backend& inner() const { return inner_; }

  std::string name() const override { return inner_.name(); }
  Device device() const override { return inner_.device(); }
  BackendCapabilities capabilities() const override { return inner_.capabilities(); }
  size_t workspace_bytes() const override { return inner_.workspace_bytes(); }
  std::optional<DeviceMemoryUse> device_memory() const override { return inner_.device_memory(); }

  void* allocate(size_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* ptr) override { inner_.deallocate(ptr); }
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override {
    inner_.copy_to_device(dst, host_src, bytes);
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override { inner_.copy_to_host(host_dst, src, bytes); }
  void synchronize() override { inner_.synchronize(); }

  void* allocate_pinned(size_t bytes) override { return inner_.allocate_pinned(bytes); }
  void deallocate_pinned(void* ptr) override { inner_.deallocate_pinned(ptr); }
  uint64_t transfer_to_host(void* host_dst, const void* src, size_t bytes) override {
    return inner_.transfer_to_host(host_dst, src, bytes);
  }
  uint64_t transfer_to_device(void* dst, const void* host_src, size_t bytes) override {
    return inner_.transfer_to_device(dst, host_src, bytes);
  }
  void wait_transfer(uint64_t ticket) override { inner_.wait_transfer(ticket); }
  void order_after_transfers() override { inner_.order_after_transfers(); }

  std::unique_ptr<Communicator> make_communicator(Communicator& host) override { return inner_.make_communicator(host); }

#define GPT_FORWARD_BACKEND_OP(method, Args, op, category) \
  void method(const Args& args) override { inner_.method(args); }
  GPT_BACKEND_OPS(GPT_FORWARD_BACKEND_OP)
#undef GPT_FORWARD_BACKEND_OP

 private:
  Backend& inner_;
};

static_assert(!std::is_abstract_v<ForwardingBackend>,
              "ForwardingBackend must forward every virtual of Backend: forward the one added there");

}  // namespace gpt

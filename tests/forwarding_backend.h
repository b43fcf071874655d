// A test Backend that passes every call on to a real backend, so that a test can change one thing a
// backend says of itself (a capability, a reserve) and watch what the model, planner or ledger make of
// it while the arithmetic stays the real backend's. Subclasses override capabilities() (and name());
// workspace_bytes() follows the changed capabilities, as the Backend's default does.
#pragma once

#include "backend/backend.h"

#include <string>

namespace gpt::test {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}

  std::string name() const override { return inner_.name(); }
  Device device() const override { return inner_.device(); }
  BackendCapabilities capabilities() const override { return inner_.capabilities(); }
  void* allocate(size_t bytes) override { return inner_.allocate(bytes); }
  void deallocate(void* ptr) override { inner_.deallocate(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override { inner_.copy_to_device(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { inner_.copy_to_host(dst, src, bytes); }
  void synchronize() override { inner_.synchronize(); }
  void* allocate_pinned(size_t bytes) override { return inner_.allocate_pinned(bytes); }
  void deallocate_pinned(void* ptr) override { inner_.deallocate_pinned(ptr); }
  uint64_t transfer_to_host(void* dst, const void* src, size_t bytes) override {
    return inner_.transfer_to_host(dst, src, bytes);
  }
  uint64_t transfer_to_device(void* dst, const void* src, size_t bytes) override {
    return inner_.transfer_to_device(dst, src, bytes);
  }
  void wait_transfer(uint64_t ticket) override { inner_.wait_transfer(ticket); }
  void order_after_transfers() override { inner_.order_after_transfers(); }
#define GPT_FORWARD_OP(method, Args, op, category) \
  void method(const Args& args) override { inner_.method(args); }
  GPT_BACKEND_OPS(GPT_FORWARD_OP)
#undef GPT_FORWARD_OP

 private:
  Backend& inner_;
};

}  // namespace gpt::test

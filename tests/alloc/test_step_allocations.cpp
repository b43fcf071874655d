// The training step allocates nothing: activations and workspaces live in arenas laid out up front and
// host staging is sized at construction. This binary replaces the global operator new to count the
// allocations made while a step runs.
#include "train/trainer.h"

#include "config/config_loader.h"
#include "train/synthetic_run.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<bool> counting{false};
std::atomic<long> allocations{0};

void* counted_allocation(std::size_t size, std::size_t alignment) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = alignment <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t size) { return counted_allocation(size, alignof(std::max_align_t)); }
void* operator new[](std::size_t size) { return counted_allocation(size, alignof(std::max_align_t)); }
void* operator new(std::size_t size, std::align_val_t a) { return counted_allocation(size, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t size, std::align_val_t a) { return counted_allocation(size, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace gpt::test {
namespace {

// Operator-new calls made by f.
template <class F>
long allocations_during(F&& f) {
  allocations = 0;
  counting = true;
  f();
  counting = false;
  return allocations.load();
}

void expect_steps_allocate_nothing(const Config& c) {
  Trainer trainer(c, config_to_yaml(c));
  const size_t n = static_cast<size_t>(c.train.batch_size) * c.train.seq_len * c.train.grad_accum_steps;
  std::vector<int32_t> inputs(n), targets(n);
  const std::vector<uint16_t> pattern = permutation_pattern();
  for (size_t i = 0; i < n; ++i) {
    inputs[i] = pattern[i % pattern.size()];
    targets[i] = pattern[(i + 1) % pattern.size()];
  }
  trainer.train_step(inputs, targets);  // the first step may set up lazily (BLAS buffers, thread pool)
  // The counter itself must see an allocation, or the test could not fail.
  EXPECT_GT(allocations_during([] { delete new int(1); }), 0);
  for (int step = 0; step < 3; ++step) {
    StepResult r;
    EXPECT_EQ(allocations_during([&] { r = trainer.train_step(inputs, targets); }), 0) << "step " << step + 2;
    EXPECT_TRUE(r.applied);
  }
}

TEST(StepAllocations, Fp32StepAllocatesNothing) {
  TempDir dir;
  expect_steps_allocate_nothing(synthetic_run(dir, permutation_pattern(), 5000, false));
}

TEST(StepAllocations, AccumulationRecomputeAndDropoutAllocateNothing) {
  TempDir dir;
  Config c = synthetic_run(dir, permutation_pattern(), 5000, false);
  c.model.dropout = 0.1;
  c.train.grad_accum_steps = 2;
  c.recompute.mode = "full";
  c.recompute.every = "2";
  expect_steps_allocate_nothing(c);
}

TEST(StepAllocations, Fp16StepAllocatesNothing) {
  TempDir dir;
  Config c = synthetic_run(dir, permutation_pattern(), 5000, false);
  c.precision.recipe = "fp16";
  c.optim.grad_clip = 1.0;
  expect_steps_allocate_nothing(c);
}

}  // namespace
}  // namespace gpt::test

// The execution model: a block's threads as fibers (Boost.Context) on one host thread, switched at
// barriers and warp collectives, with the ready threads' order shuffled from a seed at every switch.
//
// Scheduling is in rounds: the scheduler takes the threads that became ready, shuffles them and resumes
// each until it waits at a switch point or exits. The last thread to arrive at a barrier (or the last
// lane of a collective) releases the waiters into the next round. No ready thread while some have not
// exited is a deadlock, reported with the kernel's name and what each thread waits for.
//
// A failure inside a thread (a bad mask, an exception from the kernel) aborts the block: every suspended
// thread is resumed once more and unwinds its stack with an exception from its switch point, so
// destructors run and the stacks can be reused.
#include "emu/scheduler.h"

#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/fiber.hpp>
#include <boost/context/preallocated.hpp>
#include <boost/context/stack_context.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "emu/internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define GPT_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPT_EMU_ASAN 1
#endif
#endif
#if defined(GPT_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

const int warpSize = gpt::cuda::emu::detail::kWarpSize;

namespace gpt::cuda::emu::detail {
namespace {

namespace ctx = boost::context;

// Kernel threads need little stack; a guard page below each turns an overflow into a crash, not
// corruption of the neighbouring thread.
constexpr size_t kStackBytes = size_t{256} << 10;

struct Abort {};  // thrown from a switch point to unwind a thread of an aborted block

// The switch between the scheduler's stack and a fiber's, told to AddressSanitizer as its fiber API
// requires, so it tracks which stack is live (and fake stacks of detect_stack_use_after_return).
struct StackSwitch {
#if defined(GPT_EMU_ASAN)
  static void start(void** fake_save, const void* bottom, size_t size) {
    __sanitizer_start_switch_fiber(fake_save, bottom, size);
  }
  static void finish(void* fake, const void** bottom_old, size_t* size_old) {
    __sanitizer_finish_switch_fiber(fake, bottom_old, size_old);
  }
#else
  static void start(void**, const void*, size_t) {}
  static void finish(void*, const void**, size_t*) {}
#endif
};

struct Stack {
  char* base = nullptr;  // the lowest usable byte, above the guard page
  size_t size = 0;
  // AddressSanitizer's fake stack (detect_stack_use_after_return) of the fibers on this stack. Kept from
  // one fiber to the next: a fresh one per fiber would cost an mmap and munmap per CUDA thread.
  void* fake_stack = nullptr;
};

// Stacks come from the block's pool; the fiber must not free them.
struct PooledStack {
  ctx::stack_context allocate() { GPT_FAIL("kernel thread stacks come from the pool"); }
  void deallocate(ctx::stack_context&) noexcept {}
};

enum class State : uint8_t { kNew, kReady, kWaiting, kDone };

struct PendingCopy {
  void* dst;
  const void* src;
  size_t bytes, src_bytes;
  int group;  // -1 until committed
};

struct Thread {
  uint3 idx{};
  unsigned linear = 0;
  State state = State::kNew;
  ctx::fiber fiber;  // the suspended thread, as the scheduler holds it
  ctx::fiber sink;   // the scheduler, as the running thread holds it
  Stack* stack = nullptr;
  const char* waiting_at = nullptr;
  unsigned wait_mask = 0;
  LaneSlot slot{};
  std::vector<PendingCopy> copies;
  int next_group = 0;
};

struct Pending {
  unsigned mask = 0, arrived = 0;
  CollectiveOp op{};
  LaneSlot* lanes[kWarpSize] = {};
  Thread* threads[kWarpSize] = {};
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string format_dim(uint3 d) { return fmt::format("({},{},{})", d.x, d.y, d.z); }

// "0-31, 40, 42-47": the linear thread ids of a set, compactly.
std::string format_ids(const std::vector<unsigned>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += j == i ? fmt::format("{}", ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  return s;
}

class BlockRunner {
 public:
  BlockRunner() = default;
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;
  ~BlockRunner() {
    for (const auto& s : stacks_) munmap(s->base - page_size(), s->size + page_size());
  }

  void run(const KernelLaunch& launch, uint3 block_idx, uint64_t seed);

  Thread& current() {
    GPT_CHECK(current_ != nullptr, "a CUDA device function was called outside a kernel");
    return *current_;
  }
  int barrier(int predicate, BarrierMode mode);
  void collective(unsigned mask, const CollectiveOp& op);
  void* dynamic_shared() { return dynamic_shared_.get(); }

 private:
  static size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
  Stack* take_stack(size_t i);
  void resume(Thread& t);
  void yield(Thread& t);
  ctx::fiber thread_main(Thread& t, ctx::fiber&& sink);
  void release(Thread& t) {
    t.state = State::kReady;
    next_.push_back(&t);
  }
  void abort_all();
  std::string describe_deadlock() const;
  std::string where(const Thread& t) const {
    return fmt::format("kernel '{}' block {} thread {}", launch_->name, format_dim(block_idx_), format_dim(t.idx));
  }

  const KernelLaunch* launch_ = nullptr;
  uint3 block_idx_{};
  std::vector<Thread> threads_;
  std::vector<std::unique_ptr<Stack>> stacks_;  // stable addresses: threads point at theirs
  std::vector<Thread*> ready_, next_;
  size_t done_ = 0;
  Thread* current_ = nullptr;
  void* scheduler_fake_stack_ = nullptr;
  const void* scheduler_stack_bottom_ = nullptr;
  size_t scheduler_stack_size_ = 0;
  bool aborting_ = false;
  std::string error_;

  std::vector<Thread*> barrier_waiters_;
  int barrier_count_ = 0, barrier_result_ = 0;
  std::vector<std::vector<Pending>> warps_;
  // Allocated for each block at exactly the launch's size (operator new aligns to 16 bytes), so
  // AddressSanitizer sees an access past its end.
  std::unique_ptr<unsigned char[]> dynamic_shared_;
};

thread_local BlockRunner* tls_runner = nullptr;
thread_local int tls_compute_capability = 0;  // of the grid this host thread runs a block of

BlockRunner& runner() {
  GPT_CHECK(tls_runner != nullptr, "a CUDA device function was called outside a kernel");
  return *tls_runner;
}

Stack* BlockRunner::take_stack(size_t i) {
  while (stacks_.size() <= i) {
    const size_t page = page_size();
    void* p = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    GPT_CHECK(p != MAP_FAILED, "CUDA emulator: cannot map a {} KiB stack for a kernel thread", kStackBytes >> 10);
    GPT_CHECK(mprotect(p, page, PROT_NONE) == 0, "CUDA emulator: cannot protect a kernel thread's guard page");
    stacks_.push_back(std::make_unique<Stack>(Stack{static_cast<char*>(p) + page, kStackBytes, nullptr}));
  }
  return stacks_[i].get();
}

void BlockRunner::resume(Thread& t) {
  current_ = &t;
  threadIdx = t.idx;
  if (t.state == State::kNew) {
    ctx::stack_context sctx;
    sctx.size = t.stack->size;
    sctx.sp = t.stack->base + t.stack->size;
    t.fiber = ctx::fiber(std::allocator_arg, ctx::preallocated(sctx.sp, sctx.size, sctx), PooledStack{},
                         [this, &t](ctx::fiber&& sink) { return thread_main(t, std::move(sink)); });
  }
  t.state = State::kReady;
  StackSwitch::start(&scheduler_fake_stack_, t.stack->base, t.stack->size);
  t.fiber = std::move(t.fiber).resume();
  StackSwitch::finish(scheduler_fake_stack_, nullptr, nullptr);
  current_ = nullptr;
}

void BlockRunner::yield(Thread& t) {
  StackSwitch::start(&t.stack->fake_stack, scheduler_stack_bottom_, scheduler_stack_size_);
  t.sink = std::move(t.sink).resume();
  StackSwitch::finish(t.stack->fake_stack, nullptr, nullptr);
  if (aborting_) throw Abort{};
}

ctx::fiber BlockRunner::thread_main(Thread& t, ctx::fiber&& sink) {
  StackSwitch::finish(t.stack->fake_stack, &scheduler_stack_bottom_, &scheduler_stack_size_);
  t.sink = std::move(sink);
  try {
    launch_->body(launch_->params.get());
    cp_async_wait(-1);
  } catch (const Abort&) {
  } catch (const ctx::detail::forced_unwind&) {
    throw;  // Boost.Context unwinding a fiber: not the kernel's failure
  } catch (const std::exception& e) {
    if (error_.empty()) error_ = fmt::format("{}: {}", where(t), e.what());
  } catch (...) {
    if (error_.empty()) error_ = fmt::format("{}: an exception that is not a std::exception", where(t));
  }
  t.state = State::kDone;
  ++done_;
  StackSwitch::start(&t.stack->fake_stack, scheduler_stack_bottom_, scheduler_stack_size_);
  return std::move(t.sink);
}

void BlockRunner::run(const KernelLaunch& launch, uint3 block_idx, uint64_t seed) {
  launch_ = &launch;
  block_idx_ = block_idx;
  const dim3 b = launch.block;
  const size_t n = size_t{b.x} * b.y * b.z;
  threads_.clear();
  threads_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Thread& t = threads_[i];
    t.linear = static_cast<unsigned>(i);
    t.idx = {static_cast<unsigned>(i % b.x), static_cast<unsigned>((i / b.x) % b.y),
             static_cast<unsigned>(i / (size_t{b.x} * b.y))};
    t.stack = take_stack(i);
  }
  warps_.assign((n + kWarpSize - 1) / kWarpSize, {});
  barrier_waiters_.clear();
  barrier_count_ = 0;
  done_ = 0;
  error_.clear();
  dynamic_shared_.reset();
  if (launch.dynamic_shared_bytes > 0) {
    dynamic_shared_.reset(new unsigned char[launch.dynamic_shared_bytes]);
    std::memset(dynamic_shared_.get(), 0xFF, launch.dynamic_shared_bytes);
  }
  blockIdx = block_idx;
  blockDim = launch.block;
  gridDim = launch.grid;

  next_.clear();
  for (Thread& t : threads_) next_.push_back(&t);
  uint64_t rng = splitmix64(seed);
  while (done_ < n) {
    if (next_.empty()) {
      const std::string message = describe_deadlock();
      abort_all();
      GPT_FAIL("{}", message);
    }
    ready_.swap(next_);
    next_.clear();
    for (size_t i = ready_.size(); i > 1; --i) {
      rng = splitmix64(rng);
      std::swap(ready_[i - 1], ready_[rng % i]);
    }
    for (Thread* t : ready_) {
      resume(*t);
      if (!error_.empty()) break;
    }
    if (!error_.empty()) {
      const std::string message = error_;
      abort_all();
      GPT_FAIL("{}", message);
    }
  }
}

void BlockRunner::abort_all() {
  aborting_ = true;
  for (Thread& t : threads_) {
    if (t.state == State::kDone) continue;
    if (t.state == State::kNew) {
      t.state = State::kDone;
      continue;
    }
    resume(t);
  }
  aborting_ = false;
  next_.clear();
  for (auto& w : warps_) w.clear();
  barrier_waiters_.clear();
#if defined(GPT_EMU_ASAN)
  // Frames left by the unwinding keep their redzones' poison; the stacks are reused.
  for (const auto& s : stacks_) ASAN_UNPOISON_MEMORY_REGION(s->base, s->size);
#endif
}

std::string BlockRunner::describe_deadlock() const {
  std::map<std::string, std::vector<unsigned>> groups;
  for (const Thread& t : threads_) {
    std::string key;
    if (t.state == State::kDone) {
      key = "have exited";
    } else if (t.waiting_at != nullptr && std::strcmp(t.waiting_at, "__syncthreads") == 0) {
      key = "wait at __syncthreads";
    } else {
      key = fmt::format("wait at {} with mask {:#010x}", t.waiting_at, t.wait_mask);
    }
    groups[key].push_back(t.linear);
  }
  std::string s = fmt::format("deadlock in kernel '{}' block {} of {} threads: not every thread the barrier "
                              "or warp collective names can reach it;",
                              launch_->name, format_dim(block_idx_), threads_.size());
  for (const auto& [key, ids] : groups) s += fmt::format(" threads {} {};", format_ids(ids), key);
  s.pop_back();
  return s;
}

int BlockRunner::barrier(int predicate, BarrierMode mode) {
  Thread& t = current();
  t.state = State::kWaiting;
  t.waiting_at = "__syncthreads";
  barrier_waiters_.push_back(&t);
  barrier_count_ += predicate != 0;
  if (barrier_waiters_.size() == threads_.size()) {
    barrier_result_ = barrier_count_;
    barrier_count_ = 0;
    for (Thread* w : barrier_waiters_) release(*w);
    barrier_waiters_.clear();
  }
  yield(t);
  t.waiting_at = nullptr;
  switch (mode) {
    case BarrierMode::kPlain: return 0;
    case BarrierMode::kCount: return barrier_result_;
    case BarrierMode::kAnd: return barrier_result_ == static_cast<int>(threads_.size());
    case BarrierMode::kOr: return barrier_result_ > 0;
  }
  return 0;
}

void BlockRunner::collective(unsigned mask, const CollectiveOp& op) {
  Thread& t = current();
  const unsigned lane = t.linear % kWarpSize;
  const unsigned warp = t.linear / kWarpSize;
  const size_t lanes_here = std::min<size_t>(kWarpSize, threads_.size() - size_t{warp} * kWarpSize);
  const unsigned existing = lanes_here == kWarpSize ? 0xFFFFFFFFu : (1u << lanes_here) - 1;
  GPT_CHECK(mask & (1u << lane), "{} with mask {:#010x}: the calling lane {} is not in the mask", op.name, mask, lane);
  GPT_CHECK((mask & ~existing) == 0,
            "{} with mask {:#010x}: the mask names lanes that do not exist (warp {} has {} threads)", op.name, mask,
            warp, lanes_here);
  auto& pending = warps_[warp];
  auto it = std::find_if(pending.begin(), pending.end(),
                         [&](const Pending& p) { return p.mask == mask && !(p.arrived & (1u << lane)); });
  if (it == pending.end()) {
    pending.emplace_back();
    it = pending.end() - 1;
    it->mask = mask;
    it->op = op;
  }
  GPT_CHECK(it->op.combine == op.combine && it->op.common == op.common,
            "lanes of mask {:#010x} met at different warp collectives: {} and {} (or with different widths)", mask,
            it->op.name, op.name);
  it->arrived |= 1u << lane;
  it->lanes[lane] = &t.slot;
  it->threads[lane] = &t;
  t.state = State::kWaiting;
  t.waiting_at = op.name;
  t.wait_mask = mask;
  if (it->arrived == mask) {
    op.combine(it->lanes, mask, op.common);
    for (unsigned l = 0; l < kWarpSize; ++l)
      if (mask & (1u << l)) release(*it->threads[l]);
    pending.erase(it);
  }
  yield(t);
  t.waiting_at = nullptr;
}

// The blocks of a grid over a fixed set of host threads: the caller and (threads - 1) workers pull block
// indices from a shared counter. One grid runs at a time; blocks of the next wait for the pool.
class GridPool {
 public:
  GridPool() { resize(std::max(1u, std::thread::hardware_concurrency())); }
  ~GridPool() { stop(); }

  void resize(unsigned threads) {
    std::lock_guard run_lock(run_mutex_);
    stop();
    stopping_ = false;
    for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this] { worker(); });
  }

  void run(size_t count, const std::function<void(size_t)>& fn) {
    std::lock_guard run_lock(run_mutex_);
    {
      std::lock_guard lock(mutex_);
      job_ = &fn;
      count_ = count;
      next_ = 0;
      failed_ = false;
      error_ = nullptr;
      busy_ = workers_.size();
      ++generation_;
    }
    wake_.notify_all();
    work();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return busy_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }
  void worker() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      work();
      std::lock_guard lock(mutex_);
      if (--busy_ == 0) done_.notify_all();
    }
  }
  void work() {
    for (size_t i; (i = next_.fetch_add(1)) < count_;) {
      if (failed_.load()) continue;
      try {
        (*job_)(i);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
        failed_ = true;
      }
    }
  }

  std::mutex run_mutex_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t count_ = 0;
  std::atomic<size_t> next_{0};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  size_t busy_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

GridPool& grid_pool() {
  static GridPool pool;
  return pool;
}

uint64_t initial_seed() {
  const char* env = std::getenv("GPT_CUDA_EMU_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 0) : 0;
}
std::atomic<uint64_t> g_seed{initial_seed()};

// The order blocks start in: the pool hands out indices 0, 1, 2, ...; a nonzero seed maps them through
// a shuffle of the grid's blocks drawn from the seed, so a kernel that relies on block order (one block
// reading what another wrote, with no ordering the GPU guarantees) meets other orders as seeds are
// swept. Seed 0 keeps index order.
class BlockOrder {
 public:
  BlockOrder(size_t n, uint64_t seed) {
    if (seed == 0 || n < 2) return;
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), size_t{0});
    uint64_t rng = splitmix64(seed ^ 0x5bd1e995u);
    for (size_t i = n - 1; i > 0; --i) {
      rng = splitmix64(rng);
      std::swap(order_[i], order_[rng % (i + 1)]);
    }
  }
  size_t operator()(size_t pulled) const { return order_.empty() ? pulled : order_[pulled]; }

 private:
  std::vector<size_t> order_;
};

}  // namespace

void run_grid(const KernelLaunch& launch) {
  const dim3 g = launch.grid;
  const uint64_t seed = g_seed.load();
  const size_t blocks = size_t{g.x} * g.y * g.z;
  const BlockOrder order(blocks, seed);
  grid_pool().run(blocks, [&](size_t pulled) {
    const size_t i = order(pulled);
    thread_local BlockRunner block_runner;
    const uint3 idx{static_cast<unsigned>(i % g.x), static_cast<unsigned>((i / g.x) % g.y),
                    static_cast<unsigned>(i / (size_t{g.x} * g.y))};
    tls_runner = &block_runner;
    tls_compute_capability = launch.compute_capability;
    try {
      block_runner.run(launch, idx, seed ^ splitmix64(i));
    } catch (...) {
      tls_runner = nullptr;
      throw;
    }
    tls_runner = nullptr;
  });
}

void set_grid_threads(unsigned threads) { grid_pool().resize(std::max(1u, threads)); }

int syncthreads(int predicate, BarrierMode mode) { return runner().barrier(predicate, mode); }

LaneSlot& lane_slot() { return runner().current().slot; }
unsigned lane_id() { return runner().current().linear % kWarpSize; }
void warp_collective(unsigned mask, const CollectiveOp& op) { runner().collective(mask, op); }

void trap() { GPT_FAIL("__trap() called"); }

void require_compute_capability(int needed, const char* instruction) {
  GPT_CHECK(tls_compute_capability >= needed,
            "{} needs compute capability {}.{}; the emulated device is {}.{} (a kernel that uses it must not run there)",
            instruction, needed / 10, needed % 10, tls_compute_capability / 10, tls_compute_capability % 10);
}

void cp_async(void* dst, const void* src, size_t bytes, size_t src_bytes) {
  require_compute_capability(80, "cp.async");
  GPT_CHECK(src_bytes <= bytes, "cp.async: src-size {} exceeds the copy size {}", src_bytes, bytes);
  runner().current().copies.push_back({dst, src, bytes, src_bytes, -1});
}

void cp_async_commit() {
  Thread& t = runner().current();
  for (PendingCopy& c : t.copies)
    if (c.group < 0) c.group = t.next_group;
  ++t.next_group;
}

// wait_group N: every committed group but the newest N is complete. -1 (thread exit): every copy, the
// uncommitted ones included.
void cp_async_wait(int newest_groups_left) {
  Thread& t = runner().current();
  const int limit = newest_groups_left < 0 ? t.next_group + 1 : t.next_group - newest_groups_left;
  auto keep = t.copies.begin();
  for (auto it = t.copies.begin(); it != t.copies.end(); ++it) {
    const bool due = newest_groups_left < 0 || (it->group >= 0 && it->group < limit);
    if (due) {
      std::memcpy(it->dst, it->src, it->src_bytes);
      std::memset(static_cast<char*>(it->dst) + it->src_bytes, 0, it->bytes - it->src_bytes);
    } else {
      *keep++ = *it;
    }
  }
  t.copies.erase(keep, t.copies.end());
}

}  // namespace gpt::cuda::emu::detail

namespace gpt::cuda::emu {

void* dynamic_shared_memory() {
  void* p = detail::runner().dynamic_shared();
  GPT_CHECK(p != nullptr, "dynamic shared memory used by a kernel launched with shared_bytes = 0");
  return p;
}

void set_schedule_seed(uint64_t seed) { detail::g_seed = seed; }
uint64_t schedule_seed() { return detail::g_seed.load(); }
void set_host_threads(unsigned threads) { detail::set_grid_threads(threads); }

std::string kernel_name_from_signature(const char* pretty_function) {
  const std::string s = pretty_function;
  size_t pos = s.find("Kernel = ");
  if (pos == std::string::npos) return s;
  pos += 9;
  if (pos < s.size() && s[pos] == '&') ++pos;
  int depth = 0;
  size_t end = pos;
  for (; end < s.size(); ++end) {
    const char c = s[end];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth < 0 || (depth == 0 && (c == ';' || c == ',' || c == ']'))) break;
  }
  return s.substr(pos, end - pos);
}

}  // namespace gpt::cuda::emu

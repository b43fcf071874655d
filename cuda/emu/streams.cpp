// Streams, events, errors, the emulated device and kernel launches.
//
// A stream is a worker thread running its queue in order. Ordering between streams is by tickets: the
// n-th item queued on a stream completes as its counter reaches n, and an item may wait for another
// stream's counter first. That expresses cudaStreamWaitEvent and the legacy default stream: an item on
// stream 0 waits for everything queued before it on every blocking stream, and an item on a blocking
// stream waits for everything queued before it on stream 0 (non-blocking streams skip both).
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "emu/internal.h"

struct CUstream_st {
  struct Item {
    std::function<void()> work;
    std::vector<std::pair<CUstream_st*, uint64_t>> after;  // (stream, ticket) to complete first
  };

  explicit CUstream_st(bool blocks_with_default) : blocking(blocks_with_default) {
    worker = std::thread([this] { run(); });
  }
  ~CUstream_st() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    worker.join();
  }

  uint64_t push(Item item) {
    std::lock_guard lock(mutex);
    queue.push_back(std::move(item));
    const uint64_t ticket = ++enqueued;
    changed.notify_all();
    return ticket;
  }
  uint64_t last_ticket() {
    std::lock_guard lock(mutex);
    return enqueued;
  }
  void wait_for(uint64_t ticket) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return completed >= ticket; });
  }
  bool reached(uint64_t ticket) {
    std::lock_guard lock(mutex);
    return completed >= ticket;
  }

  const bool blocking;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Item> queue;
  uint64_t enqueued = 0, completed = 0;
  bool stopping = false;
  std::thread worker;

 private:
  void run() {
    for (;;) {
      Item item;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        item = std::move(queue.front());
        queue.pop_front();
      }
      for (const auto& [stream, ticket] : item.after) stream->wait_for(ticket);
      // After a kernel failed the device runs nothing more, as a CUDA context after a sticky error.
      if (gpt::cuda::emu::detail::sticky_error() == cudaSuccess) {
        try {
          item.work();
        } catch (const std::exception& e) {
          gpt::cuda::emu::detail::set_sticky_error(cudaErrorLaunchFailure, e.what());
        }
      }
      std::lock_guard lock(mutex);
      ++completed;
      changed.notify_all();
    }
  }
};

struct CUevent_st {
  unsigned flags = 0;
  std::mutex mutex;
  CUstream_st* stream = nullptr;  // of the latest record, nullptr before the first
  uint64_t ticket = 0;
  // Written by the recording item when it runs; shared so a destroyed event leaves it valid.
  std::shared_ptr<std::atomic<int64_t>> stamp_ns;
};

namespace gpt::cuda::emu::detail {
namespace {

struct Device {
  std::mutex mutex;
  DeviceConfig config;
  int current = 0;
  std::set<CUstream_st*> streams;  // created by the user
  std::map<const void*, int> max_dynamic_shared;
  std::atomic<int> sticky{cudaSuccess};
  std::unique_ptr<CUstream_st> legacy = std::make_unique<CUstream_st>(true);
};

Device& device() {
  static Device d;
  return d;
}

thread_local cudaError_t t_last_error = cudaSuccess;

std::mutex g_detail_mutex;
std::set<std::string> g_interned;  // messages handed out by cudaGetErrorString stay valid
std::map<int, const char*> g_detail;

const char* base_string(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoKernelImageForDevice: return "no kernel image is available for execution on the device";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorHostMemoryNotRegistered: return "part or all of the requested memory range is not mapped";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorUnknown: return "unknown error";
  }
  return "unrecognized error code";
}

CUstream_st* resolve(cudaStream_t s) { return s != nullptr ? s : device().legacy.get(); }

uint64_t enqueue_after(cudaStream_t stream, std::function<void()> work,
                       std::vector<std::pair<CUstream_st*, uint64_t>> after) {
  Device& d = device();
  CUstream_st* s = resolve(stream);
  std::lock_guard lock(d.mutex);
  if (s == d.legacy.get()) {
    for (CUstream_st* other : d.streams)
      if (other->blocking) after.emplace_back(other, other->last_ticket());
  } else if (s->blocking) {
    after.emplace_back(d.legacy.get(), d.legacy->last_ticket());
  }
  return s->push({std::move(work), std::move(after)});
}

}  // namespace

cudaError_t fail(cudaError_t code, const std::string& detail) {
  {
    std::lock_guard lock(g_detail_mutex);
    const auto it = g_interned.insert(fmt::format("{}: {}", base_string(code), detail)).first;
    g_detail[code] = it->c_str();
  }
  t_last_error = code;
  return code;
}

cudaError_t sticky_error() { return static_cast<cudaError_t>(device().sticky.load()); }

void set_sticky_error(cudaError_t code, const std::string& detail) {
  int expected = cudaSuccess;
  if (device().sticky.compare_exchange_strong(expected, code)) fail(code, detail);
}

cudaError_t check_sticky() {
  const cudaError_t e = sticky_error();
  if (e != cudaSuccess) t_last_error = e;
  return e;
}

DeviceConfig current_config() {
  std::lock_guard lock(device().mutex);
  return device().config;
}

bool is_stream(cudaStream_t stream) {
  if (stream == nullptr) return true;
  std::lock_guard lock(device().mutex);
  return device().streams.count(stream) > 0;
}

cudaError_t enqueue(cudaStream_t stream, std::function<void()> work) {
  if (const cudaError_t e = check_sticky()) return e;
  if (!is_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "not a stream of this device");
  enqueue_after(stream, std::move(work), {});
  return cudaSuccess;
}

cudaError_t synchronize_stream(cudaStream_t stream) {
  if (!is_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: not a stream");
  CUstream_st* s = resolve(stream);
  s->wait_for(s->last_ticket());
  return check_sticky();
}

cudaError_t synchronize_device() {
  std::vector<CUstream_st*> all;
  {
    std::lock_guard lock(device().mutex);
    all.assign(device().streams.begin(), device().streams.end());
    all.push_back(device().legacy.get());
  }
  for (CUstream_st* s : all) s->wait_for(s->last_ticket());
  return check_sticky();
}

int max_dynamic_shared(const void* function) {
  Device& d = device();
  std::lock_guard lock(d.mutex);
  const auto it = d.max_dynamic_shared.find(function);
  return it == d.max_dynamic_shared.end() ? static_cast<int>(d.config.shared_per_block_bytes) : it->second;
}

void clear_function_attributes() {
  std::lock_guard lock(device().mutex);
  device().max_dynamic_shared.clear();
}

}  // namespace gpt::cuda::emu::detail

using namespace gpt::cuda::emu;
using namespace gpt::cuda::emu::detail;

namespace gpt::cuda::emu {

cudaError_t set_function_attribute(const void* func, cudaFuncAttribute attr, int value) {
  if (const cudaError_t e = check_sticky()) return e;
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return fail(cudaErrorInvalidValue, fmt::format("cudaFuncSetAttribute: attribute {} is not emulated", int(attr)));
  const DeviceConfig c = current_config();
  if (value < 0 || static_cast<size_t>(value) > c.shared_per_block_optin_bytes)
    return fail(cudaErrorInvalidValue,
                fmt::format("cudaFuncSetAttribute: {} bytes of dynamic shared memory, the device allows at most {}",
                            value, c.shared_per_block_optin_bytes));
  std::lock_guard lock(device().mutex);
  device().max_dynamic_shared[func] = value;
  return cudaSuccess;
}

cudaError_t get_function_attributes(cudaFuncAttributes* attributes, const void* func) {
  if (const cudaError_t e = check_sticky()) return e;
  if (attributes == nullptr || func == nullptr)
    return fail(cudaErrorInvalidValue, "cudaFuncGetAttributes: null attributes or function");
  const DeviceConfig c = current_config();
  if (!c.kernel_images)
    return fail(cudaErrorNoKernelImageForDevice,
                fmt::format("cudaFuncGetAttributes: the emulated {} (compute capability {}.{}) has no code in this "
                            "binary (DeviceConfig::kernel_images)", c.name, c.major, c.minor));
  attributes->sharedSizeBytes = 0;
  attributes->maxThreadsPerBlock = c.max_threads_per_block;
  attributes->ptxVersion = attributes->binaryVersion = c.major * 10 + c.minor;
  attributes->maxDynamicSharedSizeBytes = max_dynamic_shared(func);
  return cudaSuccess;
}

void launch_kernel(KernelLaunch&& launch, CUstream_st* stream) {
  if (check_sticky() != cudaSuccess) return;
  const DeviceConfig c = current_config();
  if (!c.kernel_images) {
    fail(cudaErrorNoKernelImageForDevice,
         fmt::format("kernel '{}': the emulated {} (compute capability {}.{}) has no code in this binary "
                     "(DeviceConfig::kernel_images)", launch.name, c.name, c.major, c.minor));
    return;
  }
  const dim3 b = launch.block, g = launch.grid;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 ||
      threads > static_cast<uint64_t>(c.max_threads_per_block)) {
    fail(cudaErrorInvalidConfiguration,
         fmt::format("kernel '{}': block ({},{},{}) of {} threads; a block has 1 to {} threads, at most "
                     "(1024,1024,64) in each dimension",
                     launch.name, b.x, b.y, b.z, threads, c.max_threads_per_block));
    return;
  }
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
    fail(cudaErrorInvalidConfiguration,
         fmt::format("kernel '{}': grid ({},{},{}); each dimension is 1 to (2^31-1, 65535, 65535)", launch.name, g.x,
                     g.y, g.z));
    return;
  }
  const size_t allowed = static_cast<size_t>(max_dynamic_shared(launch.function));
  if (launch.dynamic_shared_bytes > allowed) {
    fail(cudaErrorInvalidValue,
         fmt::format("kernel '{}': {} bytes of dynamic shared memory, more than the {} allowed{}", launch.name,
                     launch.dynamic_shared_bytes, allowed,
                     launch.dynamic_shared_bytes <= c.shared_per_block_optin_bytes
                         ? " (above 48 KiB a kernel needs cudaFuncSetAttribute(MaxDynamicSharedMemorySize))"
                         : fmt::format(" (the device's limit is {})", c.shared_per_block_optin_bytes)));
    return;
  }
  launch.compute_capability = c.major * 10 + c.minor;
  enqueue(stream, [l = std::move(launch)] { run_grid(l); });
  // CUDA_LAUNCH_BLOCKING=1, as with CUDA: each launch returns when its kernel has run, so a failure is
  // reported by the launch's own error check.
  static const bool blocking = [] {
    const char* env = std::getenv("CUDA_LAUNCH_BLOCKING");
    return env != nullptr && std::string(env) == "1";
  }();
  if (blocking) synchronize_stream(stream);
}

void configure_device(const DeviceConfig& config) {
  cudaDeviceReset();
  std::lock_guard lock(device().mutex);
  device().config = config;
}

DeviceConfig device_config() { return current_config(); }

}  // namespace gpt::cuda::emu

const char* cudaGetErrorString(cudaError_t error) {
  std::lock_guard lock(g_detail_mutex);
  const auto it = g_detail.find(error);
  return it != g_detail.end() ? it->second : base_string(error);
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define GPT_EMU_NAME(e) \
  case e: return #e;
    GPT_EMU_NAME(cudaSuccess)
    GPT_EMU_NAME(cudaErrorInvalidValue)
    GPT_EMU_NAME(cudaErrorMemoryAllocation)
    GPT_EMU_NAME(cudaErrorInvalidConfiguration)
    GPT_EMU_NAME(cudaErrorInvalidDevicePointer)
    GPT_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    GPT_EMU_NAME(cudaErrorInvalidDeviceFunction)
    GPT_EMU_NAME(cudaErrorNoDevice)
    GPT_EMU_NAME(cudaErrorInvalidDevice)
    GPT_EMU_NAME(cudaErrorNoKernelImageForDevice)
    GPT_EMU_NAME(cudaErrorInvalidResourceHandle)
    GPT_EMU_NAME(cudaErrorNotReady)
    GPT_EMU_NAME(cudaErrorIllegalAddress)
    GPT_EMU_NAME(cudaErrorLaunchOutOfResources)
    GPT_EMU_NAME(cudaErrorHostMemoryNotRegistered)
    GPT_EMU_NAME(cudaErrorLaunchFailure)
    GPT_EMU_NAME(cudaErrorUnknown)
#undef GPT_EMU_NAME
  }
  return "cudaErrorUnrecognized";
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = t_last_error;
  t_last_error = sticky_error();
  return e != cudaSuccess ? e : sticky_error();
}

cudaError_t cudaPeekAtLastError() { return t_last_error != cudaSuccess ? t_last_error : sticky_error(); }

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDeviceCount: count is null");
  *count = current_config().device_count;
  return *count > 0 ? cudaSuccess : fail(cudaErrorNoDevice, "the emulated machine is configured without devices");
}

cudaError_t cudaGetDevice(int* dev) {
  if (dev == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDevice: device is null");
  std::lock_guard lock(device().mutex);
  *dev = device().current;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) {
  const int count = current_config().device_count;
  if (dev < 0 || dev >= count)
    return fail(cudaErrorInvalidDevice, fmt::format("cudaSetDevice({}): the machine has {} device(s)", dev, count));
  std::lock_guard lock(device().mutex);
  device().current = dev;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int dev) {
  const DeviceConfig c = current_config();
  if (prop == nullptr) return fail(cudaErrorInvalidValue, "cudaGetDeviceProperties: prop is null");
  if (dev < 0 || dev >= c.device_count)
    return fail(cudaErrorInvalidDevice,
                fmt::format("cudaGetDeviceProperties({}): the machine has {} device(s)", dev, c.device_count));
  *prop = cudaDeviceProp{};
  fmt::format_to_n(prop->name, sizeof(prop->name) - 1, "{}", c.name);
  prop->totalGlobalMem = c.global_memory_bytes;
  prop->sharedMemPerBlock = c.shared_per_block_bytes;
  prop->regsPerBlock = 65536;
  prop->warpSize = warpSize;
  prop->maxThreadsPerBlock = c.max_threads_per_block;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->totalConstMem = 65536;
  prop->major = c.major;
  prop->minor = c.minor;
  prop->multiProcessorCount = c.sm_count;
  prop->concurrentKernels = 1;
  prop->l2CacheSize = c.l2_cache_bytes;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->sharedMemPerMultiprocessor = c.shared_per_sm_bytes;
  prop->regsPerMultiprocessor = 65536;
  prop->sharedMemPerBlockOptin = c.shared_per_block_optin_bytes;
  prop->maxBlocksPerMultiProcessor = 32;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return synchronize_device(); }

cudaError_t cudaDeviceReset() {
  synchronize_device();
  free_all_allocations();
  clear_function_attributes();
  device().sticky = cudaSuccess;
  t_last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return fail(cudaErrorInvalidValue, "cudaRuntimeGetVersion: version is null");
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) { return cudaRuntimeGetVersion(version); }

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (const cudaError_t e = check_sticky()) return e;
  if (stream == nullptr) return fail(cudaErrorInvalidValue, "cudaStreamCreate: stream is null");
  if (flags & ~unsigned{cudaStreamNonBlocking})
    return fail(cudaErrorInvalidValue, fmt::format("cudaStreamCreateWithFlags: unknown flags {:#x}", flags));
  auto* s = new CUstream_st((flags & cudaStreamNonBlocking) == 0);
  std::lock_guard lock(device().mutex);
  device().streams.insert(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || !is_stream(stream))
    return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: not a stream created by cudaStreamCreate");
  // CUDA lets queued work finish after the call returns; finishing it first is the same to the caller.
  stream->wait_for(stream->last_ticket());
  {
    std::lock_guard lock(device().mutex);
    device().streams.erase(stream);
  }
  delete stream;
  return check_sticky();
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return synchronize_stream(stream); }

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (!is_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamQuery: not a stream");
  if (const cudaError_t e = check_sticky()) return e;
  CUstream_st* s = resolve(stream);
  return s->reached(s->last_ticket()) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (const cudaError_t e = check_sticky()) return e;
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: event is null");
  if (!is_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: not a stream");
  std::lock_guard lock(event->mutex);
  if (event->stream == nullptr) return cudaSuccess;  // never recorded: nothing to wait for, as in CUDA
  enqueue_after(stream, [] {}, {{event->stream, event->ticket}});
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr) return fail(cudaErrorInvalidValue, "cudaEventCreate: event is null");
  *event = new CUevent_st;
  (*event)->flags = flags;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: event is null");
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (const cudaError_t e = check_sticky()) return e;
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: event is null");
  if (!is_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: not a stream");
  auto stamp = std::make_shared<std::atomic<int64_t>>(-1);
  std::lock_guard lock(event->mutex);
  event->ticket = enqueue_after(
      stream,
      [stamp] {
        stamp->store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count());
      },
      {});
  event->stream = resolve(stream);
  event->stamp_ns = stamp;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: event is null");
  CUstream_st* s;
  uint64_t ticket;
  {
    std::lock_guard lock(event->mutex);
    s = event->stream;
    ticket = event->ticket;
  }
  if (s != nullptr) s->wait_for(ticket);
  return check_sticky();
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle, "cudaEventQuery: event is null");
  if (const cudaError_t e = check_sticky()) return e;
  std::lock_guard lock(event->mutex);
  return event->stream == nullptr || event->stream->reached(event->ticket) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return fail(cudaErrorInvalidValue, "cudaEventElapsedTime: ms is null");
  if (start == nullptr || end == nullptr)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: event is null");
  if ((start->flags | end->flags) & cudaEventDisableTiming)
    return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was created with DisableTiming");
  std::shared_ptr<std::atomic<int64_t>> a, b;
  {
    std::lock_guard lock(start->mutex);
    a = start->stamp_ns;
  }
  {
    std::lock_guard lock(end->mutex);
    b = end->stamp_ns;
  }
  if (!a || !b) return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was never recorded");
  if (a->load() < 0 || b->load() < 0) return cudaErrorNotReady;
  *ms = static_cast<float>(static_cast<double>(b->load() - a->load()) * 1e-6);
  return cudaSuccess;
}

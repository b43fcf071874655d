// Device and pinned host memory: host allocations kept in a registry, so that every copy and memset can
// say which side each pointer is on and refuse a call whose pointers contradict its direction.
//
// Device memory starts as 0xFF bytes: a NaN in FP32, BF16, F16, E4M3 and E5M2 alike (and -1 as an
// integer), so a kernel that reads memory nobody wrote produces NaN instead of a plausible zero.
// Each allocation is exactly its size (256-byte aligned, as cudaMalloc's), so AddressSanitizer reports a
// kernel's access past its end.
#include <map>
#include <mutex>
#include <new>

#include "core/error.h"
#include "emu/internal.h"

namespace gpt::cuda::emu::detail {
namespace {

constexpr std::align_val_t kDeviceAlignment{256};
constexpr std::align_val_t kPinnedAlignment{4096};

struct Allocation {
  size_t bytes;
  MemoryKind kind;
};

std::mutex g_mutex;
std::map<uintptr_t, Allocation> g_allocations;
size_t g_device_bytes = 0;
int g_pinned_failures = 0;  // fail_pinned_allocations' count still to come

const char* kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::kHost: return "pageable host memory";
    case MemoryKind::kDevice: return "device memory";
    case MemoryKind::kPinned: return "pinned host memory";
  }
  return "?";
}

// The allocation holding p, or end(); the caller holds g_mutex.
std::map<uintptr_t, Allocation>::const_iterator find_allocation(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations.upper_bound(a);
  if (it == g_allocations.begin()) return g_allocations.end();
  --it;
  return a < it->first + it->second.bytes ? it : g_allocations.end();
}

struct Region {
  MemoryKind kind = MemoryKind::kHost;
  std::string overrun;  // non-empty when the range runs past its allocation
};

Region region(const void* p, size_t bytes, const char* call, const char* role) {
  std::lock_guard lock(g_mutex);
  const auto it = find_allocation(p);
  if (it == g_allocations.end()) return {};
  const size_t offset = reinterpret_cast<uintptr_t>(p) - it->first;
  Region r{it->second.kind, {}};
  if (bytes > it->second.bytes - offset)
    r.overrun = fmt::format("{}: {} {} + {} bytes runs past the end of its {}-byte allocation (offset {})", call, role,
                            p, bytes, it->second.bytes, offset);
  return r;
}

cudaError_t allocate(void** ptr, size_t bytes, MemoryKind kind, const char* call) {
  if (const cudaError_t e = check_sticky()) return e;
  if (ptr == nullptr) return fail(cudaErrorInvalidValue, fmt::format("{}: the result pointer is null", call));
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  if (kind == MemoryKind::kPinned) {
    std::lock_guard lock(g_mutex);
    if (g_pinned_failures > 0) {
      --g_pinned_failures;
      return fail(cudaErrorMemoryAllocation,
                  fmt::format("{}: {} bytes of page-locked memory refused (emulator: fail_pinned_allocations)", call, bytes));
    }
  }
  if (kind == MemoryKind::kDevice) {
    const size_t total = current_config().global_memory_bytes;
    std::lock_guard lock(g_mutex);
    if (bytes > total - g_device_bytes)
      return fail(cudaErrorMemoryAllocation, fmt::format("{}: {} bytes requested, {} of the device's {} free", call,
                                                         bytes, total - g_device_bytes, total));
  }
  void* p = ::operator new(bytes, kind == MemoryKind::kDevice ? kDeviceAlignment : kPinnedAlignment, std::nothrow);
  if (p == nullptr)
    return fail(cudaErrorMemoryAllocation, fmt::format("{}: the host cannot provide {} bytes", call, bytes));
  if (kind == MemoryKind::kDevice) std::memset(p, 0xFF, bytes);
  std::lock_guard lock(g_mutex);
  g_allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, kind};
  if (kind == MemoryKind::kDevice) g_device_bytes += bytes;
  *ptr = p;
  return cudaSuccess;
}

void release(uintptr_t base, const Allocation& a) {
  ::operator delete(reinterpret_cast<void*>(base),
                    a.kind == MemoryKind::kDevice ? kDeviceAlignment : kPinnedAlignment);
}

// Unregisters the allocation that starts at ptr, if it is of `kind`; the memory is freed by the caller.
cudaError_t unregister(void* ptr, MemoryKind kind, const char* call, Allocation* out) {
  std::lock_guard lock(g_mutex);
  const auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end() || it->second.kind != kind) {
    const auto holder = find_allocation(ptr);
    return fail(cudaErrorInvalidValue,
                holder == g_allocations.end()
                    ? fmt::format("{}: {} is not {} from this device", call, ptr, kind_name(kind))
                    : fmt::format("{}: {} is inside {} but not the start of an allocation of {}", call, ptr,
                                  kind_name(holder->second.kind), kind_name(kind)));
  }
  *out = it->second;
  if (kind == MemoryKind::kDevice) g_device_bytes -= it->second.bytes;
  g_allocations.erase(it);
  return cudaSuccess;
}

const char* kind_of_copy(cudaMemcpyKind k) {
  switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
  }
  return "?";
}

// Checks a copy's pointers against its kind; `sync_host` is set when a host side is pageable, which
// CUDA copies synchronously even for cudaMemcpyAsync.
cudaError_t check_copy(const char* call, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                       bool* pageable) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return fail(cudaErrorInvalidMemcpyDirection, fmt::format("{}: copy kind {} does not exist", call, int(kind)));
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr)
    return fail(cudaErrorInvalidValue, fmt::format("{}({}): a null pointer", call, kind_of_copy(kind)));
  const Region d = region(dst, bytes, call, "dst");
  const Region s = region(src, bytes, call, "src");
  if (!d.overrun.empty()) return fail(cudaErrorInvalidValue, d.overrun);
  if (!s.overrun.empty()) return fail(cudaErrorInvalidValue, s.overrun);
  const bool dst_device = d.kind == MemoryKind::kDevice, src_device = s.kind == MemoryKind::kDevice;
  const bool want_dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyDefault) {
    for (const auto& [role, p, is_device, want_device, r] :
         {std::tuple{"dst", static_cast<const void*>(dst), dst_device, want_dst_device, d.kind},
          std::tuple{"src", src, src_device, want_src_device, s.kind}}) {
      if (is_device != want_device)
        return fail(want_device ? cudaErrorInvalidDevicePointer : cudaErrorInvalidValue,
                    fmt::format("{}({}): {} {} is {}, not {}", call, kind_of_copy(kind), role, p, kind_name(r),
                                want_device ? "device memory" : "host memory"));
    }
  }
  *pageable = (!dst_device && d.kind == MemoryKind::kHost) || (!src_device && s.kind == MemoryKind::kHost);
  return cudaSuccess;
}

cudaError_t copy(const char* call, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                 cudaStream_t stream, bool synchronous) {
  if (const cudaError_t e = check_sticky()) return e;
  bool pageable = false;
  if (const cudaError_t e = check_copy(call, dst, src, bytes, kind, &pageable)) return e;
  if (bytes == 0) return cudaSuccess;
  if (const cudaError_t e = enqueue(stream, [=] { std::memmove(dst, src, bytes); })) return e;
  return synchronous || pageable ? synchronize_stream(stream) : cudaSuccess;
}

cudaError_t set(const char* call, void* ptr, int value, size_t bytes, cudaStream_t stream, bool synchronous) {
  if (const cudaError_t e = check_sticky()) return e;
  if (bytes == 0) return cudaSuccess;
  const Region r = region(ptr, bytes, call, "ptr");
  if (!r.overrun.empty()) return fail(cudaErrorInvalidValue, r.overrun);
  if (r.kind != MemoryKind::kDevice)
    return fail(cudaErrorInvalidValue,
                fmt::format("{}: {} is {}, not device memory", call, ptr, kind_name(r.kind)));
  if (const cudaError_t e = enqueue(stream, [=] { std::memset(ptr, value, bytes); })) return e;
  return synchronous ? synchronize_stream(stream) : cudaSuccess;
}

}  // namespace

void free_all_allocations() {
  std::lock_guard lock(g_mutex);
  for (const auto& [base, a] : g_allocations) release(base, a);
  g_allocations.clear();
  g_device_bytes = 0;
}

size_t device_bytes_in_use() {
  std::lock_guard lock(g_mutex);
  return g_device_bytes;
}

}  // namespace gpt::cuda::emu::detail

using namespace gpt::cuda::emu::detail;

namespace gpt::cuda::emu {

bool is_pinned_host_memory(const void* p, size_t bytes) {
  std::lock_guard lock(g_mutex);
  const auto it = find_allocation(p);
  return it != g_allocations.end() && it->second.kind == MemoryKind::kPinned &&
         bytes <= it->second.bytes - (reinterpret_cast<uintptr_t>(p) - it->first);
}

void fail_pinned_allocations(int count) {
  std::lock_guard lock(g_mutex);
  g_pinned_failures = count;
}

}  // namespace gpt::cuda::emu

cudaError_t cudaMalloc(void** ptr, size_t bytes) { return allocate(ptr, bytes, MemoryKind::kDevice, "cudaMalloc"); }

// Stream-ordered allocation: the memory is usable by work queued on the stream after this call, which
// an immediate allocation satisfies.
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  if (!is_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaMallocAsync: not a stream");
  return allocate(ptr, bytes, MemoryKind::kDevice, "cudaMallocAsync");
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  return allocate(ptr, bytes, MemoryKind::kPinned, "cudaMallocHost");
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int flags) {
  if (flags & ~unsigned{cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined})
    return fail(cudaErrorInvalidValue, fmt::format("cudaHostAlloc: unknown flags {:#x}", flags));
  return allocate(ptr, bytes, MemoryKind::kPinned, "cudaHostAlloc");
}

// cudaFree synchronises the device before it frees, as CUDA's does.
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return check_sticky();
  synchronize_device();
  Allocation a{};
  if (const cudaError_t e = unregister(ptr, MemoryKind::kDevice, "cudaFree", &a)) return e;
  release(reinterpret_cast<uintptr_t>(ptr), a);
  return check_sticky();
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (ptr == nullptr) return check_sticky();
  if (const cudaError_t e = check_sticky()) return e;
  if (!is_stream(stream)) return fail(cudaErrorInvalidResourceHandle, "cudaFreeAsync: not a stream");
  Allocation a{};
  if (const cudaError_t e = unregister(ptr, MemoryKind::kDevice, "cudaFreeAsync", &a)) return e;
  return enqueue(stream, [ptr, a] { release(reinterpret_cast<uintptr_t>(ptr), a); });
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return check_sticky();
  synchronize_device();
  Allocation a{};
  if (const cudaError_t e = unregister(ptr, MemoryKind::kPinned, "cudaFreeHost", &a)) return e;
  release(reinterpret_cast<uintptr_t>(ptr), a);
  return check_sticky();
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return copy("cudaMemcpy", dst, src, bytes, kind, nullptr, true);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  return copy("cudaMemcpyAsync", dst, src, bytes, kind, stream, false);
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  return set("cudaMemset", ptr, value, bytes, nullptr, true);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  return set("cudaMemsetAsync", ptr, value, bytes, stream, false);
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return fail(cudaErrorInvalidValue, "cudaMemGetInfo: a null pointer");
  *total = current_config().global_memory_bytes;
  *free = *total - device_bytes_in_use();
  return check_sticky();
}

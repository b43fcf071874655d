#include "memory/arena_usage.h"

#include <cstring>
#include <vector>

namespace gpt {
namespace {

// 0xA5A5A5A5: as a float about -2.9e-16, as an int32 a token id no vocabulary has; a step that
// writes a buffer leaves something else in it.
constexpr uint32_t kPoison = 0xA5A5A5A5u;

}  // namespace

void poison_arena(Arena& arena, Backend& backend) {
  float value;
  std::memcpy(&value, &kPoison, sizeof(value));
  const auto words = static_cast<int64_t>(arena.layout().total_bytes() / 4);
  if (words > 0) backend.fill({Tensor(arena.base(), {words}, DType::F32, backend.device()), value});
}

uint64_t written_bytes(Arena& arena, Backend& backend) {
  std::vector<uint32_t> host(arena.layout().total_bytes() / 4);
  backend.copy_to_host(host.data(), arena.base(), host.size() * 4);
  uint64_t total = 0;
  for (const ArenaBuffer& b : arena.layout().buffers()) {
    const size_t first = b.offset / 4, last = (b.offset + b.bytes) / 4;
    for (size_t i = first; i < last; ++i) {
      if (host[i] != kPoison) {
        total += ArenaLayout::aligned(b.bytes);
        break;
      }
    }
  }
  return total;
}

MeasuredMemory measure_step_memory(Arena& activations, Backend& backend, std::optional<DeviceMemoryUse> device_before) {
  // written_bytes synchronises (its copy to the host), so the device's count below includes the whole step.
  MeasuredMemory m;
  m.activations = written_bytes(activations, backend);
  m.backend_workspace = backend.workspace_bytes();
  m.device_before = device_before;
  m.device_after = backend.device_memory();
  return m;
}

}  // namespace gpt

// Measuring what a step really used of an arena: fill it with a poison pattern, run the step, and see
// which buffers were written. A plan that allocates a buffer nothing writes shows up as measured <
// planned; the ledger is right only when the two are equal. Beside the arenas a backend holds device
// memory of its own (a GPU's matrix-product workspace and op scratch), which it reports; a backend that
// grew it during the step shows more than the ledger planned.
#pragma once

#include "backend/backend.h"
#include "core/arena.h"

#include <cstdint>
#include <optional>

namespace gpt {

void poison_arena(Arena& arena, Backend& backend);
// Sum of the aligned sizes of the buffers that hold at least one word other than the poison.
uint64_t written_bytes(Arena& arena, Backend& backend);

// What a step used, measured after it: the activation buffers it wrote (the arena poisoned before the
// step), the device bytes the backend holds for itself now, and on a backend with device memory of its
// own (Backend::device_memory) that memory before the step and after it.
struct MeasuredMemory {
  uint64_t activations = 0;
  uint64_t backend_workspace = 0;
  std::optional<DeviceMemoryUse> device_before, device_after;
};
// device_before: backend.device_memory() taken before the step (after poisoning).
MeasuredMemory measure_step_memory(Arena& activations, Backend& backend, std::optional<DeviceMemoryUse> device_before);

}  // namespace gpt

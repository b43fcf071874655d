// Whether the machine can hold the run, asked of the ledger before anything is allocated: a run too big
// for it would otherwise fail inside an allocation ("could not allocate 118375650560 bytes") or be killed
// by the kernel, without saying what took the memory.
#pragma once

#include "memory/arena_usage.h"
#include "memory/ledger.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpt {

struct HostMemory {
  uint64_t total = 0;      // MemTotal
  uint64_t available = 0;  // MemAvailable: what can be allocated without swapping
};

// From /proc/meminfo; nullopt where it cannot be read.
std::optional<HostMemory> host_memory();

// Throws, naming what the run needs by component and what the machine has, when the host memory the ledger
// plans is more than the memory available: its host column (memory.offload), plus its device column on a
// backend whose device memory is the host's (BackendCapabilities::device_memory_is_host).
void check_fits_host_memory(const MemoryLedger& ledger, const HostMemory& host, bool device_memory_is_host);

// The first step's check of the ledger: one line per measured component (activations, backend
// workspace) and one for their sum, each planned beside measured; equal when every line agrees.
struct PlannedVsMeasured {
  std::vector<std::string> lines;
  bool equal = true;
};
PlannedVsMeasured compare_with_ledger(const MemoryLedger& planned, const MeasuredMemory& measured);

}  // namespace gpt

// Whether the machine can hold the run, asked of the ledger before anything is allocated: a run too big
// for it would otherwise fail inside an allocation ("could not allocate 118375650560 bytes") or be killed
// by the kernel, without saying what took the memory.
#pragma once

#include "memory/arena_usage.h"
#include "memory/ledger.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpt {

struct HostMemory {
  uint64_t total = 0;      // MemTotal
  uint64_t available = 0;  // MemAvailable: what can be allocated without swapping
};

// From /proc/meminfo; nullopt where it cannot be read.
std::optional<HostMemory> host_memory();

// Throws, naming what the run needs by component and what the machine has, when the host memory the ledgers
// plan is more than the memory available: their host columns (memory.offload), plus their device columns on a
// backend whose device memory is the host's (BackendCapabilities::device_memory_is_host). node_ledgers: one
// per rank on this node (Communicator::node_ranks), which all take their memory from this host; with ZeRO-1
// each holds only its shard (data_parallel_ledger).
void check_fits_host_memory(std::span<const MemoryLedger> node_ledgers, const HostMemory& host,
                            bool device_memory_is_host);
// One process on its host.
inline void check_fits_host_memory(const MemoryLedger& ledger, const HostMemory& host, bool device_memory_is_host) {
  check_fits_host_memory(std::span<const MemoryLedger>(&ledger, 1), host, device_memory_is_host);
}

// What a backend can give a run now: on a backend with device memory of its own what it holds plus what
// the device has free, on one whose device memory is the host's the host's available memory shared by
// `ranks_on_host` processes; each less a margin of the free part (5%, at most 512 MiB) for what the run's
// start takes beside the plan (kernels loaded on first use, the libraries' state). nullopt where
// /proc/meminfo cannot be read.
std::optional<uint64_t> memory_available_to_run(const Backend& backend, int ranks_on_host = 1);
// memory.budget as bytes: nullopt when empty; a size ("8GiB"); or "auto", memory_available_to_run. Throws,
// naming `key`, on anything else or when "auto" cannot be measured.
std::optional<uint64_t> resolve_memory_budget(const std::string& text, const Backend& backend, const char* key,
                                              int ranks_on_host = 1);

// Throws before anything is allocated when the device bytes the ledger plans (its total, one rank's) do not
// fit the device: the bytes the backend already holds (its workspace, which the ledger counts) plus the
// device's free bytes. The message names what the run needs by component, what the device has, and what
// to change, with a memory.budget for the planner that fits what is free.
void check_fits_device_memory(const MemoryLedger& ledger, const DeviceMemoryUse& device);

// The first step's check of the ledger: one line per measured component (activations, backend
// workspace) and one for their sum, each planned beside measured, and on a backend with device memory of
// its own one for the device bytes the run holds (the ledger's total); equal when every line agrees.
// notes: what the device's own count (cudaMemGetInfo) says beside it, which the ledger does not plan (the
// driver's context, kernels loaded on first use, other processes) and so is reported, not compared.
struct PlannedVsMeasured {
  std::vector<std::string> lines;
  std::vector<std::string> notes;
  bool equal = true;
};
PlannedVsMeasured compare_with_ledger(const MemoryLedger& planned, const MeasuredMemory& measured);

}  // namespace gpt

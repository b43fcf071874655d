#include "train/memory_check.h"

#include "core/error.h"
#include "memory/recompute.h"

#include <fmt/format.h>

#include <fstream>
#include <string>

namespace gpt {

std::optional<HostMemory> host_memory() {
  std::ifstream in("/proc/meminfo");
  HostMemory m;
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") m.total = kib * 1024;
    if (key == "MemAvailable:") m.available = kib * 1024;
  }
  if (m.total == 0 || m.available == 0) return std::nullopt;
  return m;
}

void check_fits_host_memory(const MemoryLedger& ledger, const HostMemory& host, bool device_memory_is_host) {
  const uint64_t needed = ledger.host_total() + (device_memory_is_host ? ledger.total() : 0);
  if (needed <= host.available) return;
  const std::string offloaded =
      ledger.host_total() > 0
          ? fmt::format("memory.offload: optimizer keeps {} on the host (FP32 masters {}, gradients {}, AdamW {})",
                        format_bytes(ledger.host_total()), format_bytes(ledger.host_parameters),
                        format_bytes(ledger.host_gradients), format_bytes(ledger.host_optimizer))
          : "";
  if (!device_memory_is_host)
    GPT_FAIL("the run needs {} of host memory: {}, more than the {} this machine has available ({} in all); set "
             "memory.offload: none where the device can hold the optimizer, shard it over more ranks (dist.zero: 1), "
             "or make the model smaller",
             format_bytes(needed), offloaded, format_bytes(host.available), format_bytes(host.total));
  GPT_FAIL("the run needs {} (parameters {}, gradients {}, AdamW {}, activations {}{}{}{}), more than the {} this machine "
           "has available ({} in all); make the model or train.batch_size smaller, or set recompute.mode: full or a "
           "memory.budget (gpt-train plan CONFIG shows each choice's memory){}",
           format_bytes(needed), format_bytes(ledger.parameters + ledger.compute_weights), format_bytes(ledger.gradients),
           format_bytes(ledger.optimizer), format_bytes(ledger.activations()),
           ledger.communication > 0 ? ", communication " + format_bytes(ledger.communication) : "",
           ledger.backend_workspace > 0 ? ", backend workspace " + format_bytes(ledger.backend_workspace) : "",
           offloaded.empty() ? "" : "; " + offloaded, format_bytes(host.available), format_bytes(host.total),
           offloaded.empty() ? "" : "; on this backend host and device memory are one, so memory.offload saves nothing: "
                                    "set memory.offload: none");
}

PlannedVsMeasured compare_with_ledger(const MemoryLedger& planned, const MeasuredMemory& measured) {
  PlannedVsMeasured out;
  auto line = [&](const char* what, uint64_t p, uint64_t m) {
    out.equal &= p == m;
    out.lines.push_back(fmt::format("{}: planned {} ({} B), measured {} ({} B): {}", what, format_bytes(p), p,
                                    format_bytes(m), m, p == m ? "equal" : "DIFFERENT (the ledger is wrong: a bug)"));
  };
  line("activations", planned.activations(), measured.activations);
  line("backend workspace", planned.backend_workspace, measured.backend_workspace);
  line("activations + backend workspace", planned.activations() + planned.backend_workspace,
       measured.activations + measured.backend_workspace);
  return out;
}

}  // namespace gpt

#include "train/memory_check.h"

#include "core/error.h"
#include "memory/recompute.h"

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

void check_fits_host_memory(const MemoryLedger& ledger, const HostMemory& host) {
  GPT_CHECK(ledger.total() <= host.available,
            "the run needs {} (parameters {}, gradients {}, AdamW {}, activations {}{}), more than the {} this machine "
            "has available ({} in all); make the model or train.batch_size smaller, or set recompute.mode: full or a "
            "memory.budget (gpt-train plan CONFIG shows each choice's memory)",
            format_bytes(ledger.total()), format_bytes(ledger.parameters + ledger.compute_weights),
            format_bytes(ledger.gradients), format_bytes(ledger.optimizer), format_bytes(ledger.activations()),
            ledger.communication > 0 ? ", communication " + format_bytes(ledger.communication) : "",
            format_bytes(host.available), format_bytes(host.total));
}

}  // namespace gpt

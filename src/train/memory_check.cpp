#include "train/memory_check.h"

#include "core/error.h"
#include "memory/recompute.h"

#include <fmt/format.h>

#include <algorithm>
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

void check_fits_host_memory(std::span<const MemoryLedger> node_ledgers, const HostMemory& host,
                            bool device_memory_is_host) {
  GPT_CHECK(!node_ledgers.empty(), "check_fits_host_memory: no rank on this node");
  // The node's ranks summed component by component, so the message says what the whole host must hold.
  MemoryLedger sum;
  for (const MemoryLedger& l : node_ledgers) {
    sum.parameters += l.parameters;
    sum.master_staging += l.master_staging;
    sum.frozen_weights += l.frozen_weights;
    sum.adapter_scratch += l.adapter_scratch;
    sum.compute_weights += l.compute_weights;
    sum.gradients += l.gradients;
    sum.optimizer += l.optimizer;
    for (int u = 0; u < kActivationUses; ++u) sum.activation[u] += l.activation[u];
    sum.communication += l.communication;
    sum.fp8_state += l.fp8_state;
    sum.backend_workspace += l.backend_workspace;
    sum.host_parameters += l.host_parameters;
    sum.host_gradients += l.host_gradients;
    sum.host_optimizer += l.host_optimizer;
    sum.host_compute_weights += l.host_compute_weights;
  }
  const uint64_t needed = sum.host_total() + (device_memory_is_host ? sum.total() : 0);
  if (needed <= host.available) return;
  const size_t ranks = node_ledgers.size();
  const std::string who = ranks > 1 ? fmt::format("the {} ranks on this node need", ranks) : "the run needs";
  const std::string offloaded =
      sum.host_total() > 0
          ? fmt::format("memory.offload: optimizer keeps {} on the host (FP32 masters {}{}, gradients {}, AdamW {}{})",
                        format_bytes(sum.host_total()), format_bytes(sum.host_parameters),
                        sum.host_compute_weights > 0 ? ", compute copy " + format_bytes(sum.host_compute_weights) : "",
                        format_bytes(sum.host_gradients), format_bytes(sum.host_optimizer),
                        ranks > 1 ? ", over its ranks" : "")
          : "";
  if (!device_memory_is_host)
    GPT_FAIL("{} {} of host memory: {}, more than the {} this machine has available ({} in all); set "
             "memory.offload: none where the device can hold the optimizer, shard it over more ranks (dist.zero: 1){}, "
             "or make the model smaller",
             who, format_bytes(needed), offloaded, format_bytes(host.available), format_bytes(host.total),
             ranks > 1 ? ", spread the ranks over more nodes" : "");
  GPT_FAIL("{} {} (parameters {}, gradients {}, AdamW {}, activations {}{}{}{}), more than the {} this machine "
           "has available ({} in all); make the model or train.batch_size smaller, or set recompute.mode: full or a "
           "memory.budget (gpt-train plan CONFIG shows each choice's memory){}{}",
           who, format_bytes(needed), format_bytes(sum.weights()), format_bytes(sum.gradients),
           format_bytes(sum.optimizer), format_bytes(sum.activations()),
           sum.communication > 0 ? ", communication " + format_bytes(sum.communication) : "",
           sum.backend_workspace > 0 ? ", backend workspace " + format_bytes(sum.backend_workspace) : "",
           offloaded.empty() ? "" : "; " + offloaded, format_bytes(host.available), format_bytes(host.total),
           ranks > 1 ? ", or start fewer ranks on a node" : "",
           offloaded.empty() ? "" : "; on this backend host and device memory are one, so memory.offload saves nothing: "
                                    "set memory.offload: none");
}

namespace {

uint64_t device_free(const DeviceMemoryUse& device) { return device.total > device.used ? device.total - device.used : 0; }

// What is held plus what is free, less the margin of the free part (memory_available_to_run).
uint64_t available_with_margin(uint64_t held, uint64_t free) {
  return held + free - std::min<uint64_t>(uint64_t{512} << 20, free / 20);
}

}  // namespace

std::optional<uint64_t> memory_available_to_run(const Backend& backend, int ranks_on_host) {
  if (const std::optional<DeviceMemoryUse> device = backend.device_memory())
    return available_with_margin(device->held, device_free(*device));
  const std::optional<HostMemory> host = host_memory();
  if (!host) return std::nullopt;
  return available_with_margin(0, host->available / static_cast<uint64_t>(std::max(ranks_on_host, 1)));
}

std::optional<uint64_t> resolve_memory_budget(const std::string& text, const Backend& backend, const char* key,
                                              int ranks_on_host) {
  if (text.empty()) return std::nullopt;
  if (text == "auto") {
    const std::optional<uint64_t> bytes = memory_available_to_run(backend, ranks_on_host);
    GPT_CHECK(bytes.has_value(), "{}: auto cannot read this machine's available memory (/proc/meminfo); write a size "
              "such as 8GiB", key);
    return bytes;
  }
  const std::optional<uint64_t> bytes = parse_byte_size(text);
  GPT_CHECK(bytes.has_value(), "{}: '{}' is not a size; write e.g. 8GiB or 512MiB, or auto (what the device can give "
            "the run)", key, text);
  return bytes;
}

void check_fits_device_memory(const MemoryLedger& ledger, const DeviceMemoryUse& device) {
  const uint64_t needed = ledger.total();
  const uint64_t held = std::min<uint64_t>(device.held, needed);
  const uint64_t free = device_free(device);
  if (needed - held <= free) return;
  const uint64_t budget = available_with_margin(device.held, free) / (uint64_t{1} << 20);
  GPT_FAIL("the run needs {} of device memory (parameters {}, gradients {}, AdamW {}, activations {}{}{}, backend "
           "workspace {}), more than the device can give it: {} is free of its {}, and {} is in use ({} of it this "
           "backend's workspace, the rest the CUDA context and any other process on the device); set memory.budget: "
           "{}MiB to let the planner choose a precision, micro-batch, recomputation and offload that fit "
           "(`gpt-train plan CONFIG --budget {}MiB` shows the choice; memory.budget: auto takes what is free when the run "
           "starts), or make train.batch_size or the model smaller",
           format_bytes(needed), format_bytes(ledger.weights()), format_bytes(ledger.gradients),
           format_bytes(ledger.optimizer), format_bytes(ledger.activations()),
           ledger.communication > 0 ? ", communication " + format_bytes(ledger.communication) : "",
           ledger.fp8_state > 0 ? ", FP8 scaling state " + format_bytes(ledger.fp8_state) : "",
           format_bytes(ledger.backend_workspace), format_bytes(free), format_bytes(device.total),
           format_bytes(device.used), format_bytes(device.held), budget, budget);
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
  if (const auto& after = measured.device_after) {
    line("device memory held (every arena and the backend's workspace)", planned.total(), after->held);
    const uint64_t before = measured.device_before ? measured.device_before->used : after->used;
    const std::string grew =
        after->used > before
            ? fmt::format("the first step added {} outside the run's arenas (kernels loaded on first use, the "
                          "libraries' state)",
                          format_bytes(after->used - before))
            : "the first step added nothing";
    out.notes.push_back(fmt::format(
        "device memory: the run holds {}{}; in use (cudaMemGetInfo) {} before the first step, {} after, of {}; {}; {} "
        "beyond what the run holds (the driver's context, the libraries, any other process on the device)",
        format_bytes(after->held),
        after->held == planned.total() ? ", as the ledger planned"
                                       : fmt::format(", the ledger planned {}", format_bytes(planned.total())),
        format_bytes(before), format_bytes(after->used), format_bytes(after->total), grew,
        format_bytes(after->used > after->held ? after->used - after->held : 0)));
  }
  return out;
}

}  // namespace gpt

// What `gpt-train report` draws, read back from a run directory: the records of metrics.jsonl (written by
// the trainer, src/train/trainer.cpp) as series over the step, and the settings of config.yaml that tell
// runs apart when several are compared.
//
// metrics.jsonl holds one flat JSON object per line, each with "step":
//   a step:        loss, lr, grad_norm (before clipping), ms, tokens_per_s, target_tokens, skipped,
//                  peak_rss_bytes (the process's peak resident set so far), per recipe loss_scale, fp8_*,
//                  and on a backend with device memory device_held_bytes (the run's arenas and the backend's
//                  workspace) and device_used_bytes (the device's own count: cudaMemGetInfo)
//   validation:    val_loss
//   a sample:      sample
//   memory plan:   memory_planned_bytes, activations_planned_bytes (the ledger, once per process start)
//   measured:      activations_measured_bytes (activation arena bytes written by the first step), and on a
//                  backend with device memory device_total_bytes (the device's size)
// A non-finite value is written as null: it becomes NaN here, a gap in the line drawn.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpt {

struct Series {
  std::vector<double> step;
  std::vector<double> value;
  bool empty() const { return step.empty(); }
  void add(double s, double v) {
    step.push_back(s);
    value.push_back(v);
  }
};

struct RunMetrics {
  std::string dir;
  std::string label;     // the directory's name, set by label_runs()
  std::string settings;  // "bf16, B8 x T128 x K1, recompute none, lr 0.0006" from config.yaml; empty if unreadable
  Series loss, val_loss, lr, grad_norm, tokens_per_s, peak_rss_bytes, device_held_bytes, device_used_bytes;
  std::optional<double> memory_planned_bytes, activations_planned_bytes, activations_measured_bytes,
      device_total_bytes;
  size_t unreadable_lines = 0;  // lines that are not JSON objects with a step (a torn last line of a crash)
};

// Throws, naming the directory and what is missing, when run_dir is not a directory, has no metrics.jsonl,
// or its metrics.jsonl holds no training step.
RunMetrics read_run_metrics(const std::string& run_dir);

// Labels each run by its directory's name, or by more of its path where two names are the same.
void label_runs(std::vector<RunMetrics>& runs);

}  // namespace gpt

// Resuming a run: choosing an intact checkpoint (checkpoint.on_corrupt), refusing one whose model shape
// differs from the config, and rewinding metrics.jsonl to the checkpoint's step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpt {

// The newest checkpoint of the run whose manifest and checksums verify, or nullopt when the run has none.
// A damaged one is reported naming each bad file and mismatch; on_corrupt "fail" then throws, "previous"
// tries the next older one, first renaming the damaged one to step_N.damaged (kept for inspection, out of
// the way of pruning and of later saves) when set_aside; readers (gpt-train sample) leave the run as it is.
// Throws when checkpoints exist but none is intact.
std::optional<std::string> select_resume_checkpoint(const std::string& run_dir, const std::string& on_corrupt,
                                                    bool set_aside = true);

// Compares the checkpoint's resolved config with the current one, key by key. A changed model shape
// (any model key but dropout, init_std and init_from) throws naming every differing key with both
// values; the other changes ("train.steps: 6 -> 12") are returned, for the log.
std::vector<std::string> check_resume_config(const std::string& checkpoint_config_yaml,
                                             const std::string& current_config_yaml, const std::string& where);

// Drops the records of steps after `step` from metrics.jsonl (the resumed run writes them again), and a
// last line a crash cut short. A missing file is left missing.
void truncate_metrics_after(const std::string& path, int64_t step);

}  // namespace gpt

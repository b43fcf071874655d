// The run directory (log.run_dir) belongs to one run, trained by one process at a time.
//
// A fresh run (train.resume: false) into a directory that already holds a run would overwrite its
// checkpoints and append to its metrics.jsonl, and a later resume would continue whichever checkpoint is
// newest; so it is refused, naming the run found and the ways forward, unless train.overwrite moves the old
// run aside first. Two trainers on one directory would interleave metrics and race on checkpoints; an
// advisory lock (an open file description lock, released by the kernel when the holder exits or dies, so a
// crash leaves nothing stale) lets only one in and tells the second which process holds it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpt {

inline constexpr const char* kRunLockFile = ".lock";

// What a run directory holds of an earlier run.
struct ExistingRun {
  int64_t last_step = 0;                     // the newest step in its checkpoints or metrics.jsonl
  std::optional<int64_t> checkpoint_step;    // its newest checkpoint, if any
  int checkpoints = 0;                       // checkpoint directories (step_N, intact or not, and step_N.damaged)
  bool metrics = false;                      // a non-empty metrics.jsonl
  std::string last_written;                  // local time of the newest of these, "2026-12-01 08:15:02"
  std::string describe(const std::string& run_dir) const;  // one sentence for the user
};

// nullopt when run_dir is missing, empty, or holds nothing of a run (a config.yaml or a lock alone).
std::optional<ExistingRun> find_existing_run(const std::string& run_dir);

// Before a run starts in run_dir (held under RunDirectoryLock). A fresh run into a directory holding a run
// throws naming it and the ways forward, unless overwrite: then the old run is returned, for
// set_run_aside() once every other start check has passed. resume and overwrite together are refused: one
// continues the run the other sets aside.
std::optional<ExistingRun> check_run_directory(const std::string& run_dir, bool resume, bool overwrite);

// Moves everything in run_dir but the lock into a new sibling directory "<run_dir>.old-<time>", and returns
// its path.
std::string set_run_aside(const std::string& run_dir, const ExistingRun& run);

// Holds run_dir/.lock (created with run_dir when missing) for its lifetime. The lock file holds the
// holder's pid, host and start time, which the error of a second trainer quotes.
class RunDirectoryLock {
 public:
  explicit RunDirectoryLock(const std::string& run_dir);
  ~RunDirectoryLock();
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace gpt

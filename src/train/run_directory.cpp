#include "train/run_directory.h"

#include "core/error.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace gpt {
namespace {

// A metrics.jsonl of a long run has millions of lines; its last step is in the last few.
constexpr std::streamoff kMetricsTail = 64 * 1024;

std::string local_time(std::time_t t) {
  std::tm tm{};
  localtime_r(&t, &tm);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", tm);
}

std::time_t modified(const fs::path& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? st.st_mtime : 0;
}

// The digits after "step_" in step_N or step_N.damaged.
std::optional<int64_t> checkpoint_name_step(const std::string& name) {
  if (name.rfind("step_", 0) != 0) return std::nullopt;
  int64_t step = 0;
  const char* first = name.data() + 5;
  auto [ptr, ec] = std::from_chars(first, name.data() + name.size(), step);
  if (ec != std::errc() || ptr == first) return std::nullopt;
  return step;
}

// The step of the last {"step":N,...} record in metrics.jsonl.
std::optional<int64_t> last_metrics_step(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - kMetricsTail);
  in.seekg(from);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  constexpr std::string_view kKey = "{\"step\":";
  std::optional<int64_t> last;
  for (size_t at = tail.find(kKey); at != std::string::npos; at = tail.find(kKey, at + 1)) {
    int64_t step = 0;
    const char* first = tail.data() + at + kKey.size();
    auto [ptr, ec] = std::from_chars(first, tail.data() + tail.size(), step);
    if (ec == std::errc() && ptr != first) last = step;
  }
  return last;
}

std::string timestamp_suffix() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  return fmt::format("{:%Y%m%d-%H%M%S}", tm);
}

}  // namespace

std::string ExistingRun::describe(const std::string& run_dir) const {
  std::string held;
  if (checkpoints > 0)
    held = checkpoint_step ? fmt::format("{} checkpoint(s), the newest of step {}", checkpoints, *checkpoint_step)
                           : fmt::format("{} checkpoint(s)", checkpoints);
  if (metrics) held += std::string(held.empty() ? "" : " and ") + "metrics.jsonl";
  return fmt::format("'{}' holds a run trained to step {} (last written {}): {}", run_dir, last_step, last_written,
                     held);
}

std::optional<ExistingRun> find_existing_run(const std::string& run_dir) {
  const fs::path root(run_dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::nullopt;
  ExistingRun run;
  std::time_t newest = 0;
  for (const auto& entry : fs::directory_iterator(root / "checkpoints", ec)) {
    const auto step = checkpoint_name_step(entry.path().filename().string());
    if (!step) continue;
    ++run.checkpoints;
    run.checkpoint_step = std::max(run.checkpoint_step.value_or(*step), *step);
    run.last_step = std::max(run.last_step, *step);
    newest = std::max(newest, modified(entry.path()));
  }
  const fs::path metrics = root / "metrics.jsonl";
  if (fs::file_size(metrics, ec) > 0 && !ec) {
    run.metrics = true;
    run.last_step = std::max(run.last_step, last_metrics_step(metrics).value_or(0));
    newest = std::max(newest, modified(metrics));
  }
  if (run.checkpoints == 0 && !run.metrics) return std::nullopt;
  run.last_written = local_time(newest);
  return run;
}

std::optional<ExistingRun> check_run_directory(const std::string& run_dir, bool resume, bool overwrite) {
  GPT_CHECK(!(resume && overwrite),
            "train.resume and train.overwrite are both true: resume continues the run in '{}', overwrite sets it "
            "aside to start afresh; set one of them",
            run_dir);
  if (resume) return std::nullopt;
  const auto run = find_existing_run(run_dir);
  if (!run) return std::nullopt;
  GPT_CHECK(overwrite,
            "{}. A fresh run (train.resume: false) would overwrite it. Continue it with --set train.resume=true, "
            "train into another directory with --set log.run_dir=..., or set it aside and start afresh with --set "
            "train.overwrite=true (moves it to '{}.old-<time>')",
            run->describe(run_dir), run_dir);
  return run;
}

std::string set_run_aside(const std::string& run_dir, const ExistingRun& run) {
  // The old run moves into a sibling directory, entry by entry, so the lock file (and this process's lock)
  // stays where it is.
  const fs::path root(run_dir);
  fs::path aside = root.string() + ".old-" + timestamp_suffix();
  for (int n = 2; fs::exists(aside); ++n) aside = root.string() + ".old-" + timestamp_suffix() + "-" + std::to_string(n);
  std::error_code ec;
  fs::create_directory(aside, ec);
  GPT_CHECK(!ec, "train.overwrite: cannot create '{}' to move the old run into: {}", aside.string(), ec.message());
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.path().filename() == kRunLockFile) continue;
    std::error_code mv;
    fs::rename(entry.path(), aside / entry.path().filename(), mv);
    GPT_CHECK(!mv, "train.overwrite: cannot move '{}' to '{}': {}", entry.path().string(), aside.string(),
              mv.message());
  }
  GPT_CHECK(!ec, "train.overwrite: cannot list '{}': {}", run_dir, ec.message());
  spdlog::warn("train.overwrite: {}; moved it to '{}'", run.describe(run_dir), aside.string());
  return aside.string();
}

RunDirectoryLock::RunDirectoryLock(const std::string& run_dir) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  GPT_CHECK(!ec, "cannot create the run directory '{}' (log.run_dir): {}", run_dir, ec.message());
  const std::string path = (fs::path(run_dir) / kRunLockFile).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  GPT_CHECK(fd_ >= 0, "cannot open the lock file '{}': {}", path, std::strerror(errno));
  // An open file description lock, unlike a classic POSIX record lock, conflicts within one process too
  // and is not dropped when some other descriptor of the file is closed.
  struct flock lock{};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (::fcntl(fd_, F_OFD_SETLK, &lock) != 0) {
    const int err = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof(holder) - 1, 0);
    ::close(fd_);
    fd_ = -1;
    GPT_CHECK(err != EAGAIN && err != EACCES, "'{}' is in use by another trainer ({}); wait for it to finish, stop "
              "it, or train into another log.run_dir",
              run_dir, n > 0 ? std::string(holder, static_cast<size_t>(n) - (holder[n - 1] == '\n')) : "process unknown");
    GPT_FAIL("cannot lock '{}': {}", path, std::strerror(err));
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string who = fmt::format("pid {} on {}, since {}\n", ::getpid(), host,
                                      local_time(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
  // Only the holder writes it; a failed write loses the description, not the lock.
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, who.data(), who.size(), 0) != static_cast<ssize_t>(who.size()))
    spdlog::warn("could not record this process in '{}': {}", path, std::strerror(errno));
}

RunDirectoryLock::~RunDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace gpt

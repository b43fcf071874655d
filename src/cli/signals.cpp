#include "cli/signals.h"

#include "core/error.h"
#include "train/stop_request.h"

#include <cerrno>
#include <csignal>
#include <cstring>

#include <unistd.h>

namespace gpt {
namespace {

constexpr const char* kAloneMessage =
    "\ngpt-train: stop requested; finishing the current step and writing a checkpoint "
    "(send the signal again to exit at once without one)\n";
constexpr const char* kDataParallelMessage =
    "\ngpt-train: stop requested; if every rank is still running, the ranks finish the current step and write a "
    "checkpoint; if one has died, the job ends without one (send the signal again to exit at once)\n";
const char* g_message = kAloneMessage;

// Only async-signal-safe calls: an atomic exchange, strlen, write(2), signal(), raise().
extern "C" void on_stop_signal(int sig) {
  const int saved_errno = errno;
  int none = 0;
  if (!g_stop_request.compare_exchange_strong(none, sig)) {
    // The second signal: the user does not want to wait for the step and the checkpoint.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, g_message, std::strlen(g_message));
  errno = saved_errno;
}

}  // namespace

void install_stop_signal_handlers(bool data_parallel) {
  g_message = data_parallel ? kDataParallelMessage : kAloneMessage;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // file I/O in progress continues instead of failing with EINTR
  for (int sig : {SIGINT, SIGTERM})
    GPT_CHECK(::sigaction(sig, &action, nullptr) == 0, "cannot install the handler of signal {}: {}", sig,
              std::strerror(errno));
}

}  // namespace gpt

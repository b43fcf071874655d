// What the first SIGTERM says: alone, a checkpoint follows; in a data-parallel job only if no rank died
// (a launcher signals the survivors when one does, and the checkpoint takes every rank).
#include "cli/signals.h"
#include "train/stop_request.h"

#include <gtest/gtest.h>

#include <csignal>

namespace gpt {
namespace {

std::string message_of_first_sigterm(bool data_parallel) {
  install_stop_signal_handlers(data_parallel);
  ::testing::internal::CaptureStderr();
  std::raise(SIGTERM);
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(stop_requested());
  clear_stop_request();
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  return said;
}

TEST(StopSignalMessage, ADataParallelJobPromisesACheckpointOnlyIfNoRankDied) {
  const std::string alone = message_of_first_sigterm(false);
  EXPECT_NE(alone.find("finishing the current step and writing a checkpoint"), std::string::npos) << alone;
  const std::string ranks = message_of_first_sigterm(true);
  EXPECT_NE(ranks.find("if every rank is still running"), std::string::npos) << ranks;
  EXPECT_NE(ranks.find("if one has died, the job ends without one"), std::string::npos) << ranks;
}

}  // namespace
}  // namespace gpt

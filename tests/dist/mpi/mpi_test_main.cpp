// The main of gpt_dist_tests: MPI up, the world communicator, then GoogleTest on every rank. Every rank
// runs the same tests in the same order, so their collectives match; a test that fails on one rank
// while the other waits in a collective ends in the communicator's timeout instead of a hang.
#include "dist/mpi_communicator.h"
#include "mpi_test_util.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

namespace gpt::test {
namespace {
Communicator* g_world = nullptr;
}

Communicator& world() { return *g_world; }

SharedDir::SharedDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  int32_t pid = world().rank() == 0 ? static_cast<int32_t>(::getpid()) : 0;
  world().broadcast(Tensor(&pid, {1}, DType::I32), 0);
  path_ = std::filesystem::temp_directory_path() / ("gpt_dist_tests_" + std::to_string(pid) + "_" +
                                                    info->test_suite_name() + "_" + info->name());
  if (world().rank() == 0) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  world().barrier();
}

SharedDir::~SharedDir() {
  try {
    world().barrier();
  } catch (...) {
  }
  if (world().rank() == 0) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
}

}  // namespace gpt::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  spdlog::set_level(spdlog::level::warn);  // the trainers' progress lines of both ranks would drown the results
  gpt::MpiRuntime mpi;
  int failed = 0;
  {
    gpt::MpiCommunicator comm;
    comm.set_timeout(120.0);
    gpt::test::g_world = &comm;
    if (comm.world_size() < 2) {
      std::fprintf(stderr, "gpt_dist_tests needs at least 2 ranks: run it under mpirun -np 2\n");
      return 1;
    }
    failed = RUN_ALL_TESTS();
    int any = failed != 0;
    comm.all_reduce_sum(gpt::Tensor(&any, {1}, gpt::DType::I32));
    failed = any;
  }
  return failed;
}

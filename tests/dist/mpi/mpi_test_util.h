// Shared by the tests gpt_dist_tests runs as several MPI ranks (ctest starts it under mpirun -np 2): the
// world communicator, a directory every rank shares, and a counting communicator.
#pragma once

#include "dist/communicator.h"
#include "test_util.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gpt::test {

// The communicator over all ranks of the test job (set up by the test main).
Communicator& world();

// A directory named by rank 0 and shared by every rank, removed when the last user is done. Each test
// gets its own.
class SharedDir {
 public:
  SharedDir();
  ~SharedDir();
  SharedDir(const SharedDir&) = delete;
  SharedDir& operator=(const SharedDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Counts the reductions (all-reduce and reduce-scatter) per buffer address.
class CountingCommunicator final : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  CommHandle all_reduce_sum_async(const Tensor& buf, CommStream stream = {}) override {
    ++reductions[buf.data];
    elements[buf.data] = buf.numel();
    return inner_.all_reduce_sum_async(buf, stream);
  }
  CommHandle reduce_scatter_sum_async(const Tensor& in, const Tensor& out, CommStream stream = {}) override {
    ++reductions[in.data];
    elements[in.data] = in.numel();
    return inner_.reduce_scatter_sum_async(in, out, stream);
  }
  std::map<const void*, int> reductions;
  std::map<const void*, int64_t> elements;
};

}  // namespace gpt::test

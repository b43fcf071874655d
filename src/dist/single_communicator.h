// The communicator of a run with one process: every collective is complete on return. A reduction
// over one rank is the identity, so the all-reduces and broadcast do nothing and reduce-scatter and
// all-gather are copies.
#pragma once

#include "dist/communicator.h"

namespace gpt {

class SingleCommunicator final : public Communicator {
 public:
  std::string name() const override { return "single"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::vector<int> node_ranks() const override { return {0}; }

  CommHandle all_reduce_sum_async(const Tensor& buf, CommStream stream = {}) override;
  CommHandle reduce_scatter_sum_async(const Tensor& in, const Tensor& out, CommStream stream = {}) override;
  CommHandle all_gather_async(const Tensor& in, const Tensor& out, CommStream stream = {}) override;
  CommHandle all_reduce_max_async(const Tensor& buf, CommStream stream = {}) override;
  CommHandle broadcast_async(const Tensor& buf, int root, CommStream stream = {}) override;
  CommHandle barrier_async() override { return {}; }
};

}  // namespace gpt

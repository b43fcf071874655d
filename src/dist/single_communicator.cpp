#include "dist/single_communicator.h"

#include <cstring>

namespace gpt {
namespace {

// Host buffers only: the CUDA build brings its own communicator (NCCL), whose copies run on its stream.
void copy_host(const char* op, const Tensor& out, const Tensor& in) {
  GPT_CHECK(out.device == Device::CPU, "{}: the single-process communicator copies host buffers only, got {}", op,
            device_name(out.device));
  if (out.data != in.data) std::memmove(out.data, in.data, in.bytes());
}

}  // namespace

CommHandle SingleCommunicator::all_reduce_sum_async(const Tensor&, CommStream) { return {}; }

CommHandle SingleCommunicator::reduce_scatter_sum_async(const Tensor& in, const Tensor& out, CommStream) {
  check_scatter_shapes("reduce_scatter_sum", out, in);
  copy_host("reduce_scatter_sum", out, in);
  return {};
}

CommHandle SingleCommunicator::all_gather_async(const Tensor& in, const Tensor& out, CommStream) {
  check_scatter_shapes("all_gather", in, out);
  copy_host("all_gather", out, in);
  return {};
}

CommHandle SingleCommunicator::all_reduce_max_async(const Tensor& buf, CommStream) {
  check_max_dtype("all_reduce_max", buf);
  return {};
}

CommHandle SingleCommunicator::broadcast_async(const Tensor&, int root, CommStream) {
  GPT_CHECK(root == 0, "broadcast: root {} outside a world of 1", root);
  return {};
}

}  // namespace gpt

// Data parallelism: every rank runs the model on its own part of each batch, and the gradients are summed
// over the ranks once per optimizer step, so W ranks with micro-batch B train like one rank with W·B.
//
// Buckets. Backward finishes the gradients of block L-1 first, then L-2, ..., block 0, and those of the
// embeddings (wte, wpe) and the final LayerNorm last. Each block is one bucket, and the embeddings with the
// final LayerNorm one more. The llm.c layout keeps a block's gradients as 12 strided slices of the
// [L, ...] tensors, so each bucket is packed into its own contiguous region of a bucket buffer whose
// layout is planned here, before training: a step allocates nothing. During the last micro-batch of a
// step, GPT::backward's hook packs each bucket as soon as it is final and starts its reduction while
// backward carries on with the earlier blocks; earlier micro-batches only accumulate (no_sync). The
// optimizer then waits for the buckets in the order they were started, unpacking each as it lands.
//
// ZeRO-1 (dist.zero: 1). Each bucket is padded to a multiple of W and reduce-scattered instead of
// all-reduced: rank r receives the summed gradients of chunk r of every bucket and keeps AdamW moments for
// those elements only (1/W of the optimizer state). After updating its chunks it all-gathers the weights,
// so every rank again holds the whole model for the next forward. With the FP32 masters on the host
// (masters_on_host in memory/planner.h) the gather still runs in the buckets on the device: each rank's
// updated chunks cross into them and the gathered weights back into its host masters.
//
// On a GPU the communicator (NCCL) orders each reduction after the packing on the compute stream and
// overlaps it with the rest of backward on a stream of its own; waiting for a bucket orders the compute
// stream after its reduction without blocking the host (cuda/comm/nccl_communicator.h).
//
// On one rank every operation here reduces to the plain single-process step, bit for bit.
#pragma once

#include "dist/communicator.h"
#include "model/gpt.h"
#include "optim/adamw.h"

#include <memory>
#include <span>
#include <vector>

namespace gpt {

class DataParallel {
 public:
  // reduce_dtype: the buckets' format, the model's (f32 masters) or one the communicator sums narrower
  // (bf16 over NCCL: half the bytes, each rank's gradients rounded once before the sum).
  DataParallel(GPT& model, Communicator& comm, int zero_stage, DType reduce_dtype = DType::F32);

  Communicator& comm() { return comm_; }
  int rank() const { return comm_.rank(); }
  int world_size() const { return comm_.world_size(); }
  // The ZeRO stage in effect: 0 on one rank whatever was asked.
  int zero_stage() const { return zero_; }

  // Buckets in plan order: block 0..L-1, then the embeddings and final LayerNorm. bucket(i) is bucket i's
  // packed region of the bucket buffer (its reductions are what tests count).
  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  Tensor bucket(int i) const;

  // GPT::backward's hook during the last micro-batch: `block` in [0, L) or -1 for the embeddings and
  // final LayerNorm. Packs that bucket and starts its reduction.
  void gradients_ready(int block);
  // Starts every bucket the hook has not started this step (a backward without the hook).
  void start_remaining();
  // Waits for every bucket of this step and returns the squared L2 norm of the summed gradients. Without
  // ZeRO the gradient arena then holds the sums; with ZeRO-1 the shard buffer holds this rank's chunks.
  double finish_gradients();
  // The AdamW update of the summed gradients; with ZeRO-1 this rank's chunks, then the all-gather of the
  // weights.
  void optimizer_step(AdamW& optimizer, double lr, double grad_scale);
  // The parameter ranges this rank's optimizer owns: every tensor whole, or its ZeRO-1 chunks.
  std::vector<ParamRange> optimizer_ranges() const;

  // Sums host values over the ranks (token counts, loss sums), through a small buffer of the backend.
  void all_reduce(std::span<double> values);
  // The elementwise max over the ranks of magnitudes (FP8 amaxes; a sign is dropped), NaN where any rank
  // has NaN, +inf where any has +inf and none NaN; one collective per 128 values whatever the ranks.
  void all_reduce_max(std::span<float> values);
  // Makes every rank's weights rank 0's; masters on the host pass the model's staging buffer on the way.
  void broadcast_parameters();
  // Bytes one rank sends per optimizer step in the bucket collectives, counted as ring algorithms (NCCL's,
  // and MPI's for large buffers) move them: an all-reduce of n bytes sends 2(W-1)/W n, a reduce-scatter
  // or an all-gather (W-1)/W n each. 0 on one rank.
  double bytes_sent_per_step() const;
  // Bytes of the bucket, shard and scalar buffers.
  size_t buffer_bytes() const { return arena_ ? arena_->layout().total_bytes() : 0; }

 private:
  struct Segment {  // part of a bucket: elements of one parameter tensor
    size_t tensor;
    int64_t offset, count;
    int64_t packed;  // offset in the bucket
    Tensor grad, param, slot;  // views: in the gradient and parameter arenas, and in the bucket buffer
  };
  struct Bucket {
    std::vector<Segment> segments;
    int64_t count = 0;   // gradient elements
    int64_t padded = 0;  // with ZeRO-1 a multiple of W
    int64_t offset = 0;  // in the bucket buffer
    int64_t shard_offset = 0;  // of this rank's chunk in the shard buffer (ZeRO-1)
    bool started = false;
    CommHandle handle;
  };
  struct Piece {  // a ZeRO-1 chunk of a bucket, split at its segments' boundaries
    ParamRange range;
    int bucket;
    int64_t packed;  // offset in the bucket
    Tensor grad;     // in the shard buffer
  };

  int bucket_of(int block) const { return block < 0 ? static_cast<int>(buckets_.size()) - 1 : block; }
  void start(int b);

  GPT& model_;
  Communicator& comm_;
  Backend& backend_;
  int zero_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<int> order_;  // buckets in the order backward finishes them
  std::vector<Piece> pieces_;
  std::vector<Tensor> piece_grads_;
  std::unique_ptr<Arena> arena_;
  Tensor buckets_buffer_, shard_, scalars_;
  std::vector<int32_t> max_bits_;  // host staging of all_reduce_max, sized once
};

}  // namespace gpt

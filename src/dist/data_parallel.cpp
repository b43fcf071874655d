#include "dist/data_parallel.h"

#include <algorithm>
#include <bit>
#include <string_view>

namespace gpt {
namespace {

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// The buckets reduce in the masters' precision unless dist.reduce_dtype says bf16; gradients stored in
// another format (precision.grad_dtype) are converted into them and back, as a GPU reduces BF16
// gradients in an FP32 bucket.
void convert_into(Backend& backend, const Tensor& out, const Tensor& in) {
  if (out.dtype == in.dtype) backend.copy({out, in});
  else backend.cast({out, in});
}

// Buckets and ZeRO-1 chunks start on 64-element (256-byte f32) boundaries, the arenas' alignment.
constexpr int64_t kGranule = 64;
// Host values summed per collective by all_reduce().
constexpr int64_t kScalars = 64;
// Broadcasts move at most this many bytes per call (MPI counts are ints).
constexpr int64_t kBroadcastBytes = int64_t{1} << 30;

}  // namespace

DataParallel::DataParallel(GPT& model, Communicator& comm, int zero_stage, DType reduce_dtype)
    : model_(model), comm_(comm), backend_(model.backend()), zero_(comm.world_size() > 1 ? zero_stage : 0) {
  GPT_CHECK(zero_stage == 0 || zero_stage == 1, "dist.zero: stage {} does not exist here; use 0 or 1", zero_stage);
  const int W = comm.world_size();
  if (W == 1) return;
  const ParameterLayout& layout = model.parameter_layout();
  const int L = model.config().n_layer;
  buckets_.resize(static_cast<size_t>(L) + 1);
  for (size_t i = 0; i < layout.specs().size(); ++i) {
    const ArenaBuffer& buffer = layout.arena_layout().buffer(i);
    const auto numel = static_cast<int64_t>(buffer.bytes / dtype_size(buffer.dtype));
    auto add = [&](Bucket& b, int64_t offset, int64_t count) {
      b.segments.push_back(Segment{i, offset, count, b.count, {}, {}, {}});
      b.count += count;
    };
    if (outside_blocks(layout.specs()[i].name)) {
      add(buckets_[static_cast<size_t>(L)], 0, numel);
    } else {
      GPT_CHECK(buffer.ndim >= 2 && buffer.shape[0] == L, "parameter '{}' is not one slice per block", buffer.name);
      const int64_t per_block = numel / L;
      for (int l = 0; l < L; ++l) add(buckets_[static_cast<size_t>(l)], l * per_block, per_block);
    }
  }

  const DType dtype = reduce_dtype;
  GPT_CHECK(comm.sums(dtype), "dist.reduce_dtype {}: the {} communicator does not sum {} values; use fp32{}",
            dtype_name(dtype), comm.name(), dtype_name(dtype),
            comm.name() == "mpi" ? " (bf16 sums need NCCL: train.backend cuda)" : "");
  GPT_CHECK(zero_ == 0 || dtype == model.dtype(),
            "dist.reduce_dtype {} with dist.zero 1: ZeRO-1 gathers the {} weights through the gradient buckets; "
            "use dist.reduce_dtype fp32", dtype_name(dtype), dtype_name(model.dtype()));
  int64_t offset = 0, shard_offset = 0;
  for (Bucket& b : buckets_) {
    b.padded = round_up(b.count, zero_ == 1 ? kGranule * W : kGranule);
    b.offset = offset;
    offset += b.padded;
    b.shard_offset = shard_offset;
    if (zero_ == 1) shard_offset += b.padded / W;
  }
  ArenaLayout plan("data_parallel");
  plan.add("buckets", {offset}, dtype);
  if (zero_ == 1) plan.add("shard", {shard_offset}, dtype);
  plan.add("scalars", {kScalars}, DType::F64);
  arena_ = std::make_unique<Arena>(std::move(plan), backend_);
  // Zero once: padding is never written, so it reduces to zero and gathers as zero.
  backend_.fill({Tensor(arena_->base(), {static_cast<int64_t>(arena_->layout().total_bytes() / 4)}, DType::F32,
                        backend_.device()),
                 0.0f});
  buckets_buffer_ = arena_->tensor("buckets");
  if (zero_ == 1) shard_ = arena_->tensor("shard");
  scalars_ = arena_->tensor("scalars");
  max_bits_.resize(2 * static_cast<size_t>(kScalars));

  Arena& params = model.parameter_arena();
  Arena& grads = model.gradient_arena();
  for (Bucket& b : buckets_) {
    for (Segment& s : b.segments) {
      s.grad = grads.tensor(s.tensor).elements(s.offset, s.count);
      s.param = params.tensor(s.tensor).elements(s.offset, s.count);
      s.slot = buckets_buffer_.elements(b.offset + s.packed, s.count);
    }
  }
  for (int l = L - 1; l >= 0; --l) order_.push_back(l);
  order_.push_back(L);

  if (zero_ == 1) {
    const int r = comm.rank();
    for (size_t bi = 0; bi < buckets_.size(); ++bi) {
      const Bucket& b = buckets_[bi];
      const int64_t chunk = b.padded / W, lo = r * chunk, hi = lo + chunk;
      for (const Segment& s : b.segments) {
        const int64_t begin = std::max(lo, s.packed), end = std::min(hi, s.packed + s.count);
        if (begin >= end) continue;
        ParamRange range{s.tensor, s.offset + (begin - s.packed), end - begin};
        pieces_.push_back(Piece{range, static_cast<int>(bi), begin, shard_.elements(b.shard_offset + begin - lo, end - begin)});
        piece_grads_.push_back(pieces_.back().grad);
      }
    }
  }
}

Tensor DataParallel::bucket(int i) const {
  const Bucket& b = buckets_.at(static_cast<size_t>(i));
  return buckets_buffer_.elements(b.offset, zero_ == 1 ? b.padded : b.count);
}

void DataParallel::start(int bi) {
  Bucket& b = buckets_[static_cast<size_t>(bi)];
  GPT_CHECK(!b.started, "gradient bucket {} was started twice in one step", bi);
  for (const Segment& s : b.segments) convert_into(backend_, s.slot, s.grad);
  if (zero_ == 1) {
    const int64_t chunk = b.padded / comm_.world_size();
    b.handle = comm_.reduce_scatter_sum_async(buckets_buffer_.elements(b.offset, b.padded),
                                              shard_.elements(b.shard_offset, chunk));
  } else {
    b.handle = comm_.all_reduce_sum_async(buckets_buffer_.elements(b.offset, b.count));
  }
  b.started = true;
}

void DataParallel::gradients_ready(int block) {
  if (buckets_.empty()) return;
  GPT_CHECK(block >= -1 && block < num_buckets() - 1, "gradients_ready: block {} outside [-1, {})", block,
            num_buckets() - 1);
  start(bucket_of(block));
  comm_.poll();
}

void DataParallel::start_remaining() {
  for (int bi : order_)
    if (!buckets_[static_cast<size_t>(bi)].started) start(bi);
}

double DataParallel::finish_gradients() {
  if (buckets_.empty()) return model_.gradient_norm_squared();
  start_remaining();
  for (int bi : order_) {
    Bucket& b = buckets_[static_cast<size_t>(bi)];
    b.handle.wait();
    b.started = false;
    if (zero_ == 0)
      for (const Segment& s : b.segments) convert_into(backend_, s.grad, s.slot);
  }
  if (zero_ == 0) return model_.gradient_norm_squared();
  // The model's own norm scratch (its ledger plans it for every step).
  Tensor norm = model_.activation_arena().tensor("sum_squares").prefix({1});
  backend_.sum_of_squares({norm, shard_});
  float local = 0.0f;
  backend_.copy_to_host(&local, norm.data, sizeof(float));
  double total = local;
  all_reduce({&total, 1});
  return total;
}

void DataParallel::optimizer_step(AdamW& optimizer, double lr, double grad_scale) {
  Arena& params = model_.parameter_arena();
  if (zero_ == 0) {
    optimizer.step(params, model_.gradient_arena(), lr, grad_scale);
    if (optimizer.writes_compute_copy()) model_.compute_copy_written();
    return;
  }
  optimizer.step(params, piece_grads_, lr, grad_scale);
  // The updated chunks go into the buckets, which the gather fills with every rank's. Masters on the host
  // (masters_on_host) cross the bus both ways on the copy stream: each copy in starts after the ops queued
  // before it and the gather waits for all of them; each copy out starts once its bucket has landed and
  // overlaps the later buckets' gathers, and the host waits for the last before the weights are read.
  const bool host_masters = model_.masters_on_host();
  for (const Piece& p : pieces_) {
    const Bucket& b = buckets_[static_cast<size_t>(p.bucket)];
    const Tensor slot = buckets_buffer_.elements(b.offset + p.packed, p.range.count);
    const Tensor master = params.tensor(p.range.tensor).elements(p.range.offset, p.range.count);
    if (host_masters) backend_.transfer_to_device(slot.data, master.data, slot.bytes());
    else backend_.copy({slot, master});
  }
  if (host_masters) backend_.order_after_transfers();
  const int W = comm_.world_size(), r = comm_.rank();
  for (int bi : order_) {
    Bucket& b = buckets_[static_cast<size_t>(bi)];
    const int64_t chunk = b.padded / W;
    b.handle = comm_.all_gather_async(buckets_buffer_.elements(b.offset + r * chunk, chunk),
                                      buckets_buffer_.elements(b.offset, b.padded));
  }
  uint64_t landed = 0;
  for (int bi : order_) {
    Bucket& b = buckets_[static_cast<size_t>(bi)];
    b.handle.wait();
    for (const Segment& s : b.segments) {
      if (host_masters) landed = backend_.transfer_to_host(s.param.data, s.slot.data, s.slot.bytes());
      else backend_.copy({s.param, s.slot});
    }
  }
  if (host_masters) backend_.wait_transfer(landed);
}

double DataParallel::bytes_sent_per_step() const {
  const double W = comm_.world_size();
  double bytes = 0.0;
  for (const Bucket& b : buckets_) {
    const double size = static_cast<double>(zero_ == 1 ? b.padded : b.count) * dtype_size(buckets_buffer_.dtype);
    bytes += 2.0 * (W - 1.0) / W * size;  // all-reduce, or reduce-scatter + all-gather of the weights
  }
  return bytes;
}

std::vector<ParamRange> DataParallel::optimizer_ranges() const {
  if (zero_ != 1) return whole_tensors(model_.parameter_layout());
  std::vector<ParamRange> ranges;
  for (const Piece& p : pieces_) ranges.push_back(p.range);
  return ranges;
}

void DataParallel::all_reduce(std::span<double> values) {
  if (comm_.world_size() == 1) return;
  for (size_t begin = 0; begin < values.size(); begin += kScalars) {
    const size_t n = std::min<size_t>(kScalars, values.size() - begin);
    Tensor buffer = scalars_.elements(0, static_cast<int64_t>(n));
    backend_.copy_to_device(buffer.data, values.data() + begin, n * sizeof(double));
    comm_.all_reduce_sum(buffer);
    backend_.copy_to_host(values.data() + begin, buffer.data, n * sizeof(double));
  }
}

void DataParallel::all_reduce_max(std::span<float> values) {
  if (comm_.world_size() == 1) return;
  // The bits of a float without its sign, read as an integer, order as its magnitude does, with +inf
  // above every finite value and every NaN above +inf. So an integer max (exact in NCCL and MPI, on the
  // device's buffer) is the max magnitude, NaN where any rank has NaN, +inf where one has +inf and none
  // NaN; a float max would not do: NCCL's drops NaNs.
  const Tensor buffer(scalars_.data, {2 * kScalars}, DType::I32, scalars_.device);
  for (size_t begin = 0; begin < values.size(); begin += max_bits_.size()) {
    const size_t n = std::min(max_bits_.size(), values.size() - begin);
    for (size_t i = 0; i < n; ++i)
      max_bits_[i] = static_cast<int32_t>(std::bit_cast<uint32_t>(values[begin + i]) & 0x7fffffffu);
    Tensor chunk = buffer.elements(0, static_cast<int64_t>(n));
    backend_.copy_to_device(chunk.data, max_bits_.data(), n * sizeof(int32_t));
    comm_.all_reduce_max(chunk);
    backend_.copy_to_host(max_bits_.data(), chunk.data, n * sizeof(int32_t));
    for (size_t i = 0; i < n; ++i) values[begin + i] = std::bit_cast<float>(static_cast<uint32_t>(max_bits_[i]));
  }
}

void DataParallel::broadcast_parameters() {
  if (comm_.world_size() == 1) return;
  Arena& params = model_.parameter_arena();
  const auto total = static_cast<int64_t>(params.layout().total_bytes());
  // Masters the device's communicator reaches: the device's own, or host masters where device memory is
  // the host's.
  if (!model_.masters_on_host() || backend_.capabilities().device_memory_is_host) {
    for (int64_t begin = 0; begin < total; begin += kBroadcastBytes) {
      const int64_t n = std::min(kBroadcastBytes, total - begin);
      comm_.broadcast(Tensor(static_cast<char*>(params.base()) + begin, {n}, DType::U8, backend_.device()), 0);
    }
    return;
  }
  // Host masters, which the device's communicator may not reach: piece by piece through device memory the
  // model lends (its staging buffer, or its compute copy, cast again by the next forward), host -> device ->
  // broadcast -> host, on every rank (rank 0's copy back rewrites its own bits).
  const Tensor staging = model_.master_bounce_buffer();
  const auto piece = static_cast<int64_t>(staging.bytes());
  char* const base = static_cast<char*>(params.base());
  for (int64_t begin = 0; begin < total; begin += piece) {
    const int64_t n = std::min(piece, total - begin);
    const Tensor bytes(staging.data, {n}, DType::U8, staging.device);
    backend_.copy_to_device(bytes.data, base + begin, static_cast<size_t>(n));
    comm_.broadcast(bytes, 0);
    backend_.copy_to_host(base + begin, bytes.data, static_cast<size_t>(n));
  }
}

}  // namespace gpt

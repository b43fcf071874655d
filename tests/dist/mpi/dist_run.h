// Tiny training runs for the data-parallel tests: a synthetic shard every rank reads, configs, and the
// comparisons (losses from metrics.jsonl, parameters) with their tolerances. The comparisons are shared
// by the MPI tests (tests/dist/mpi, train.backend cpu) and the NCCL ones (tests/cuda/dist/mpi, cuda on
// the emulator), which pass their own configs.
#pragma once

#include "config/config_loader.h"
#include "data/shard.h"
#include "dist/data_parallel.h"
#include "io/checkpoint.h"
#include "io/optimizer_shards.h"
#include "memory/levers.h"
#include "mpi_test_util.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <tuple>

namespace gpt::test {

// The shard is written by rank 0; every rank then reads it.
inline Config dist_run(const SharedDir& dir, int batch_size, int accum, int steps = 5) {
  if (world().rank() == 0) {
    std::vector<uint16_t> tokens(30000);
    const std::vector<uint16_t> pattern{1, 4, 2, 8, 5, 7, 3, 3, 9, 0, 11, 6, 2, 13, 15, 1, 10};
    uint32_t x = 5;
    for (size_t i = 0; i < tokens.size(); ++i) {
      x = x * 1664525u + 1013904223u;
      // Mostly a learnable cycle, with some noise so the gradients stay large for all 5 steps.
      tokens[i] = (x >> 28) < 3 ? static_cast<uint16_t>(x >> 28) : pattern[i % pattern.size()];
    }
    write_shard(dir.file("train_000000.bin"), tokens);
  }
  world().barrier();
  Config c;
  c.model = tiny_model(16, 2, 32, 2, 16);
  c.data.train = dir.file("train_*.bin");
  c.data.val = "";
  c.train.batch_size = batch_size;
  c.train.seq_len = 16;
  c.train.grad_accum_steps = accum;
  c.train.steps = steps;
  c.train.threads = 1;
  c.train.eval_every = 0;
  c.train.sample_every = 0;
  c.train.sample_tokens = 0;
  c.optim.lr = 1e-2;
  c.optim.warmup_steps = 2;
  c.log.run_dir = dir.file("run");
  c.log.every = 1000;
  c.dist.timeout_s = 60;
  return c;
}

// max_i |a_i - b_i| / max_i |b_i|.
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// Values of the model's FP8 weights (the linear weights of its FP8 blocks). Each rank casts them once per
// step, so a step's FP8 value count over W ranks exceeds one rank accumulating all W halves by W - 1 times
// this.
inline int64_t fp8_weight_values(GPT& model) {
  int64_t values = 0;
  for (const BlockParameters& w : model.compute_params().blocks)
    for (const Tensor* t : {&w.qkvw, &w.attprojw, &w.fcw, &w.fcprojw})
      if (t->scaling) values += t->numel();
  return values;
}

// fp8 with delayed scaling and E5M2 gradients: `two` (one micro-batch of `batch` sequences per rank)
// against one rank accumulating all the ranks' halves. The amaxes are maxed over the ranks before the scales
// are updated, so every rank casts with the scales the single rank uses. Each micro-batch's forward is the
// same on both sides; the gradient sums run in another order, so the weights differ in their last bits,
// which an FP8 cast may round to the neighbouring value: the tolerances are those of the FP32 runs.
inline void expect_fp8_ranks_cast_like_one_rank(const SharedDir& dir, Config two, int batch, int steps, const char* label,
                                                double loss_tolerance, double weight_tolerance) {
  two.precision.recipe = "fp8";
  two.precision.fp8_backward = "e5m2";
  two.precision.fp8_amax_history = 4;
  Config one = two;
  one.train.grad_accum_steps = 2;
  one.log.run_dir = dir.file("one_rank" + std::to_string(world().rank()));
  Trainer dp(two, config_to_yaml(two), &world());
  Trainer ref(one, config_to_yaml(one));
  std::mt19937 rng(7);  // the same stream on every rank
  const int B = batch, T = two.train.seq_len, W = world().world_size(), r = world().rank();
  const int64_t weight_values = fp8_weight_values(ref.model());
  for (int step = 0; step < steps; ++step) {
    std::vector<int32_t> all_in(static_cast<size_t>(W) * B * T), all_tg(all_in.size());
    for (size_t i = 0; i < all_in.size(); ++i) {
      all_in[i] = static_cast<int32_t>(rng() % 16);
      all_tg[i] = static_cast<int32_t>(rng() % 16);
    }
    const size_t begin = static_cast<size_t>(r) * B * T;
    const std::vector<int32_t> in(all_in.begin() + begin, all_in.begin() + begin + B * T),
        tg(all_tg.begin() + begin, all_tg.begin() + begin + B * T);
    const StepResult a = dp.train_step(in, tg);
    const StepResult b = ref.train_step(all_in, all_tg);
    EXPECT_EQ(a.fp8.scale_min, b.fp8.scale_min) << "step " << step;
    EXPECT_EQ(a.fp8.scale_max, b.fp8.scale_max) << "step " << step;
    EXPECT_EQ(a.fp8.amax_max, b.fp8.amax_max) << "step " << step;
    // The activations' FP8 values add up alike; the FP8 weights are cast once per step by each rank,
    // and once by the rank that accumulates both halves.
    EXPECT_EQ(a.fp8.values, b.fp8.values + (W - 1) * weight_values) << "step " << step;
    EXPECT_NEAR(a.loss, b.loss, loss_tolerance * b.loss) << "step " << step;
  }
  const double diff = relative_difference(dp.model().parameters_to_host(), ref.model().parameters_to_host());
  std::printf("[rank %d] %s fp8 delayed e5m2, 2 ranks vs 1 rank K=2: weights differ by %.2e of their largest\n", r,
              label, diff);
  EXPECT_LT(diff, weight_tolerance);
}

// Whether every rank holds exactly rank 0's values.
inline bool same_on_every_rank(std::vector<float> values) {
  std::vector<float> root = values;
  world().broadcast(Tensor(root.data(), {static_cast<int64_t>(root.size())}), 0);
  int32_t differs = root != values;
  world().all_reduce_sum(Tensor(&differs, {1}, DType::I32));
  return differs == 0;
}

// Masked targets spread unevenly over the ranks, with K = two.train.grad_accum_steps micro-batches of B =
// two.train.batch_size: rank r's micro-batch k is rows [(kW + r)B, (kW + r + 1)B) of the step's K W B
// rows, which `one` (one rank, a batch of W B rows accumulated K times or B rows K W times) reads in
// order. Either way the loss is normalised by the step's target tokens on all ranks, so rank 1's mostly
// masked rows weigh what they would in one big batch (and with dropout, micro-batch kW + r draws its own
// masks on both sides).
inline void expect_masked_targets_like_one_rank(const SharedDir& dir, const Config& two, Config one, int steps,
                                                const std::string& comm_name, double loss_tolerance,
                                                double weight_tolerance) {
  const int B = two.train.batch_size, T = two.train.seq_len, K = two.train.grad_accum_steps;
  const int W = world().world_size(), r = world().rank();
  one.log.run_dir = dir.file("one_rank" + std::to_string(r));
  Trainer dp(two, config_to_yaml(two), &world());
  ASSERT_EQ(dp.data_parallel().comm().name(), comm_name);
  Trainer ref(one, config_to_yaml(one));

  std::mt19937 rng(42);  // the same stream on every rank
  for (int step = 0; step < steps; ++step) {
    std::vector<int32_t> all_in(static_cast<size_t>(K) * W * B * T), all_tg(all_in.size());
    for (size_t i = 0; i < all_in.size(); ++i) {
      const size_t row = i / T % (static_cast<size_t>(W) * B);
      const double masked = row < static_cast<size_t>(B) ? 0.1 : 0.8;  // rank 0's rows mostly kept
      all_in[i] = static_cast<int32_t>(rng() % 16);
      all_tg[i] = std::uniform_real_distribution<double>(0, 1)(rng) < masked ? -1 : static_cast<int32_t>(rng() % 16);
    }
    std::vector<int32_t> in, tg;
    for (int k = 0; k < K; ++k) {
      const size_t begin = (static_cast<size_t>(k) * W * B + static_cast<size_t>(r) * B) * T;
      in.insert(in.end(), all_in.begin() + begin, all_in.begin() + begin + B * T);
      tg.insert(tg.end(), all_tg.begin() + begin, all_tg.begin() + begin + B * T);
    }
    const StepResult a = dp.train_step(in, tg);
    const StepResult b = ref.train_step(all_in, all_tg);
    EXPECT_EQ(a.target_tokens, b.target_tokens);
    EXPECT_NEAR(a.loss, b.loss, loss_tolerance * b.loss) << "step " << step;
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-4 * b.grad_norm) << "step " << step;
  }
  const std::vector<float> p = dp.model().parameters_to_host();
  const double diff = relative_difference(p, ref.model().parameters_to_host());
  std::printf("[rank %d] %s, masked targets%s, %d ranks x K=%d vs 1 rank x B=%d K=%d: weights differ by %.2e of their "
              "largest\n", r, comm_name.c_str(), two.model.dropout > 0 ? " + dropout" : "", W, K, one.train.batch_size,
              one.train.grad_accum_steps, diff);
  EXPECT_LT(diff, weight_tolerance);
  EXPECT_TRUE(same_on_every_rank(p)) << "the ranks' weights drifted apart";
}

// ZeRO-1 against plain data parallelism from the same config, without clipping: the same losses and weights
// bit for bit. The reduce-scatter sums the same two halves an all-reduce sums, and AdamW is elementwise;
// only the gradient norm is computed otherwise, as per-rank sums of squares over the shards, each rounded
// to F32 and added in double, against one sum over the whole arena rounded to F32. The logged norms agree
// within those roundings: norm^2 within 2^-23 (2^-24 each way), so the norm within 2^-24 = 6.0e-8 (measured,
// g++: up to 2.2e-8 of it over the NCCL run's 4 steps, 1.2e-8 over the MPI run's 5, some steps equal).
// Clipping would carry that difference into every update (the clip scale clip / norm, rounded to F32), and
// AdamW does not keep it small. The key bias of attention has a gradient that is zero in exact arithmetic
// (softmax ignores a shift common to a query's scores, and q . b_k is the same for every key) and rounding noise in practice,
// which AdamW divides by its own RMS into steps of about lr. Any change of the forward changes that noise,
// so a one-ulp change of the clip scale moves key-bias weights by a fraction of lr: with grad_clip scaled
// by 1 + 1e-7 the NCCL run's weights moved by 9.3e-6 of their largest (every tensor but the three LayerNorm
// weights differs; the most a key bias, 9.6e-6, by flipping its sign), which is the 1.17e-5 that the clang
// ASan build once measured between ZeRO-1 and plain with clipping on; g++'s rounding happened to give both
// the same F32 clip scale. Each rank keeps AdamW state for about 1/W of the elements.
inline void expect_zero_like_plain(const SharedDir& dir, Config plain, const char* label) {
  plain.optim.grad_clip = 0.0;
  Config zero = plain;
  zero.dist.zero = 1;
  zero.log.run_dir = dir.file("run_zero");
  Trainer a(plain, config_to_yaml(plain), &world());
  a.run();
  Trainer b(zero, config_to_yaml(zero), &world());
  EXPECT_EQ(b.data_parallel().zero_stage(), 1);
  EXPECT_LT(b.optimizer().num_elements(), a.optimizer().num_elements() / 2 + 64 * (plain.model.n_layer + 1));
  EXPECT_LT(b.optimizer().state_bytes(), a.optimizer().state_bytes() * 0.6);
  b.run();
  const auto la = logged_losses(plain.log.run_dir);
  ASSERT_EQ(la.size(), static_cast<size_t>(plain.train.steps));
  EXPECT_EQ(logged_losses(zero.log.run_dir), la);
  const auto norms = logged_metric(plain.log.run_dir, "grad_norm");
  const auto zero_norms = logged_metric(zero.log.run_dir, "grad_norm");
  ASSERT_EQ(zero_norms.size(), norms.size());
  for (const auto& [step, norm] : norms) {
    std::printf("[rank %d] %s ZeRO-1 vs plain, step %lld: gradient norms differ by %.2e of the norm\n", world().rank(),
                label, static_cast<long long>(step), std::abs(zero_norms.at(step) - norm) / norm);
    EXPECT_NEAR(zero_norms.at(step), norm, 0x1p-24 * norm) << "step " << step;
  }
  const std::vector<float> pb = b.model().parameters_to_host();
  EXPECT_EQ(pb, a.model().parameters_to_host()) << label << ": ZeRO-1's weights are not plain data parallelism's";
  EXPECT_TRUE(same_on_every_rank(pb));
}

// ZeRO-1 with AdamW offloaded (memory.offload: optimizer) against ZeRO-1 with AdamW on the device, from
// `base` (its batch_size the global batch per rank), with and without accumulation: the same losses and
// weights bit for bit, the host's AdamW rounding as the device's does; each rank's host holds only its
// shard's masters, gradients and moments, not the whole model's.
inline void expect_zero_offload_equals_zero_on_device_bitwise(const SharedDir& dir, const Config& base) {
  for (const int accum : {1, 2}) {
    SCOPED_TRACE("accumulation " + std::to_string(accum));
    Config device = base;
    device.train.batch_size = base.train.batch_size / accum;
    device.train.grad_accum_steps = accum;
    device.dist.zero = 1;
    device.log.run_dir = dir.file("device_" + std::to_string(accum));
    Config offloaded = device;
    offloaded.memory.offload = "optimizer";
    offloaded.log.run_dir = dir.file("offload_" + std::to_string(accum));
    Trainer a(device, config_to_yaml(device), &world());
    a.run();
    Trainer b(offloaded, config_to_yaml(offloaded), &world());
    EXPECT_TRUE(b.optimizer().offloaded());
    EXPECT_EQ(b.optimizer().host_master_bytes(), b.optimizer().state_bytes() / 2);
    EXPECT_LT(b.optimizer().num_elements(), b.model().num_parameters() * 0.6);
    b.run();
    if (world().rank() == 0) {
      const auto losses = logged_losses(device.log.run_dir);
      EXPECT_EQ(losses.size(), static_cast<size_t>(base.train.steps));
      EXPECT_EQ(logged_losses(offloaded.log.run_dir), losses);
    }
    EXPECT_EQ(a.model().parameters_to_host(), b.model().parameters_to_host());
    EXPECT_TRUE(same_on_every_rank(b.model().parameters_to_host()));
  }
}

// Offload with the FP32 masters on every rank's host (a recipe with a compute copy: masters_on_host) against
// the same run with AdamW on the device, from `device` (its dist.zero, recipe and accumulation as given): the
// same losses and weights bit for bit, as the start's broadcast through the staging buffer gives every rank
// rank 0's masters and the host's AdamW rounds as the device's does. The device holds no FP32 weights, and
// each rank's ledger (the trainer's, and data_parallel_ledger's that the host-memory check adds up) is what
// it allocated: all the masters on the host, with ZeRO-1 only its shard's gradient copy and moments.
inline void expect_host_masters_offload_equals_device_bitwise(const SharedDir& dir, Config device,
                                                             const std::string& label) {
  SCOPED_TRACE(label);
  device.log.run_dir = dir.file(label + "_device");
  Config offloaded = device;
  offloaded.memory.offload = "optimizer";
  offloaded.log.run_dir = dir.file(label + "_offload");
  Trainer a(device, config_to_yaml(device), &world());
  a.run();
  Trainer b(offloaded, config_to_yaml(offloaded), &world());
  ASSERT_TRUE(b.model().masters_on_host());
  ASSERT_TRUE(b.optimizer().masters_in_parameters());
  EXPECT_EQ(b.data_parallel().zero_stage(), device.dist.zero);

  const MemoryLedger ledger = b.rank_ledger();
  const MemoryLedger planned = data_parallel_ledger(offloaded, b.model().activation_plan().policy,
                                                    offloaded.train.batch_size, b.model().backend().capabilities(),
                                                    world().world_size(), world().rank());
  EXPECT_EQ(ledger.parameters, 0u);
  const Arena *staging = b.model().master_staging_arena(), *twin = b.model().host_compute_arena();
  EXPECT_EQ(ledger.master_staging, staging ? staging->layout().total_bytes() : 0u);
  EXPECT_EQ(ledger.host_compute_weights, twin ? twin->layout().total_bytes() : 0u);
  EXPECT_EQ(ledger.host_parameters, b.model().parameter_arena().layout().total_bytes());
  EXPECT_EQ(ledger.host_gradients, b.optimizer().host_gradient_bytes());
  EXPECT_EQ(ledger.host_optimizer, b.optimizer().state_bytes());
  EXPECT_EQ(ledger.optimizer, 0u);
  EXPECT_EQ(ledger.communication, b.data_parallel().buffer_bytes());
  for (const auto& [name, ours, theirs] :
       {std::tuple{"host_parameters", ledger.host_parameters, planned.host_parameters},
        std::tuple{"host_gradients", ledger.host_gradients, planned.host_gradients},
        std::tuple{"host_optimizer", ledger.host_optimizer, planned.host_optimizer},
        std::tuple{"parameters", ledger.parameters, planned.parameters},
        std::tuple{"master_staging", ledger.master_staging, planned.master_staging},
        std::tuple{"host_compute_weights", ledger.host_compute_weights, planned.host_compute_weights}})
    EXPECT_EQ(ours, theirs) << name << ": the trainer's ledger against data_parallel_ledger's";
  if (device.dist.zero == 1) EXPECT_LT(b.optimizer().num_elements(), b.model().num_parameters() * 0.6);

  b.run();
  if (world().rank() == 0) {  // which writes metrics.jsonl
    const auto losses = logged_losses(device.log.run_dir);
    EXPECT_EQ(losses.size(), static_cast<size_t>(device.train.steps));
    EXPECT_EQ(logged_losses(offloaded.log.run_dir), losses);
  }
  const std::vector<float> weights = b.model().parameters_to_host();
  EXPECT_EQ(weights, a.model().parameters_to_host()) << label << ": the host masters are not the device's";
  EXPECT_TRUE(same_on_every_rank(weights)) << "the ranks' host masters drifted apart";
}

// `steps` steps on 2 ranks with ZeRO-1 (from `c`, whose run it takes over) write a checkpoint of two
// optimizer shards. Resumed on 2 ranks for as many steps again it continues bit for bit; resumed on 1
// rank (with the same global batch) it continues like the 2-rank run within the data-parallel
// tolerance. And a 1-rank checkpoint (optimizer.bin) resumes on 2 ranks under ZeRO-1.
inline void expect_zero_checkpoint_resumes_on_other_rank_counts(const SharedDir& dir, Config c, int steps,
                                                                const char* label) {
  namespace fs = std::filesystem;
  const int r = world().rank();
  ASSERT_EQ(world().world_size(), 2) << "the 1-rank runs below take twice the micro-batches of 2 ranks";
  c.train.steps = steps;
  c.dist.zero = 1;
  c.model.dropout = 0.1;
  c.optim.warmup_steps = 10;  // the learning rate of the first 2 x steps does not depend on train.steps then
  { Trainer first(c, config_to_yaml(c), &world()); first.run(); }
  const std::string ckpt = checkpoint_dir(c.log.run_dir, steps);
  if (r == 0) {
    EXPECT_TRUE(fs::exists(fs::path(ckpt) / optimizer_shard_name(0, 2)));
    EXPECT_TRUE(fs::exists(fs::path(ckpt) / optimizer_shard_name(1, 2)));
    EXPECT_FALSE(fs::exists(fs::path(ckpt) / "optimizer.bin"));
    EXPECT_TRUE(verify_checkpoint(ckpt).empty());
    fs::copy(c.log.run_dir, dir.file("run_for_one"), fs::copy_options::recursive);
  }
  world().barrier();

  Config straight = c;
  straight.train.steps = 2 * steps;
  straight.log.run_dir = dir.file("straight");
  Trainer s(straight, config_to_yaml(straight), &world());
  s.run();
  const std::vector<float> expected = s.model().parameters_to_host();

  Config resumed = straight;
  resumed.log.run_dir = c.log.run_dir;
  resumed.train.resume = true;
  Trainer two(resumed, config_to_yaml(resumed), &world());
  EXPECT_EQ(two.step(), steps);
  two.run();
  EXPECT_EQ(two.model().parameters_to_host(), expected) << label << ": a 2-rank ZeRO-1 resume is not exact";

  if (r == 0) {
    // Rank 0 alone: twice the micro-batches, the global batch unchanged; dropout masks as 2 accumulated halves.
    Config one = resumed;
    one.log.run_dir = dir.file("run_for_one");
    one.train.grad_accum_steps = 2 * c.train.grad_accum_steps;
    Trainer single(one, config_to_yaml(one));
    EXPECT_EQ(single.step(), steps);
    single.run();
    const double diff = relative_difference(single.model().parameters_to_host(), expected);
    std::printf("%s ZeRO-1 checkpoint of 2 ranks resumed on 1: weights after %d steps differ by %.2e of their "
                "largest\n", label, 2 * steps, diff);
    EXPECT_LT(diff, 1e-4);

    Config whole = c;
    whole.dist.zero = 0;
    whole.train.grad_accum_steps = 2 * c.train.grad_accum_steps;
    whole.log.run_dir = dir.file("single_first");
    Trainer w(whole, config_to_yaml(whole));
    w.run();
  }
  world().barrier();
  // The 1-rank checkpoint (optimizer.bin) continued on 2 ranks with ZeRO-1.
  Config from_one = straight;
  from_one.log.run_dir = dir.file("single_first");
  from_one.train.resume = true;
  Trainer z(from_one, config_to_yaml(from_one), &world());
  EXPECT_EQ(z.step(), steps);
  z.run();
  const double diff = relative_difference(z.model().parameters_to_host(), expected);
  std::printf("[rank %d] %s 1-rank checkpoint resumed on 2 ranks with ZeRO-1: weights after %d steps differ by %.2e\n",
              r, label, 2 * steps, diff);
  EXPECT_LT(diff, 1e-4);
}

// DataParallel::all_reduce_max over the ranks' FP8 amaxes, non-finite ones included: each element is
// the max over the ranks, NaN where any rank has NaN, +inf where one has +inf and none NaN, as every
// rank's scales must come from the same amaxes. 300 values: more than one collective's worth.
inline void expect_max_over_ranks_keeps_nonfinite(DataParallel& dp) {
  const int W = dp.world_size(), r = dp.rank();
  const size_t n = 300;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto values_of = [&](int q) {
    std::mt19937 rng(1000 + static_cast<uint32_t>(q));  // rank q's values, which every rank can compute
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t kind = rng() % 8;
      v[i] = kind == 0   ? nan
             : kind == 1 ? inf
             : kind == 2 ? 0.0f
             : kind == 3 ? std::numeric_limits<float>::denorm_min() * static_cast<float>(rng() % 100)
                         : std::ldexp(std::uniform_real_distribution<float>(0.5f, 1.0f)(rng),
                                      static_cast<int>(rng() % 60) - 30);
    }
    return v;
  };
  std::vector<std::vector<float>> all;
  for (int q = 0; q < W; ++q) all.push_back(values_of(q));
  std::vector<float> got = all[static_cast<size_t>(r)];
  dp.all_reduce_max(got);
  int nans = 0, infs = 0;
  for (size_t i = 0; i < n; ++i) {
    float expected = 0.0f;
    bool any_nan = false;
    for (const std::vector<float>& v : all) {
      const float x = v[i];
      any_nan = any_nan || std::isnan(x);
      expected = std::max(expected, x);
    }
    if (any_nan) {
      ++nans;
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": " << got[i];
    } else {
      infs += std::isinf(expected);
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected)) << "element " << i;
    }
  }
  EXPECT_GT(nans, 0);
  EXPECT_GT(infs, 0);
}

}  // namespace gpt::test

// Optimizer offload (memory.offload: optimizer) on the CPU backend, where host and device memory are one and
// the offloaded optimizer runs the same host-AdamW code path it runs beside a GPU:
//   - an offloaded run equals the same run without offload bit for bit (losses and weights) over 5 steps,
//     with and without accumulation, in fp32, in bf16 with BF16 gradients (the host copy in BF16), fp16 and
//     fp8 (delayed and current scaling); under the narrow recipes the FP32 masters are in host memory only,
//     and the compute copy is cast from them where they are (the GPU's paths: the emulator's
//     tests/cuda/model/test_cuda_offload.cpp);
//   - resuming an offloaded run from its checkpoint equals the uninterrupted run, in fp32, bf16 and fp8;
//   - with the masters on the host, the ledger's device column has no FP32 masters, and on a backend whose
//     device memory is not the host's its host column the compute copy's twin (bf16) or its device column
//     the staging buffer (fp8), in the bytes the model allocates;
//   - AdamW's offloaded update over ranges (a ZeRO-1 shard) and with gradients staged block by block
//     equals the update on the device;
//   - the ledger's host column, the planner choosing offload last (and never where device memory is the
//     host's), and the host-memory check refusing a run that cannot fit, on an injected host-memory figure.
#include "backend/separate_host_memory_backend.h"
#include "config/config_loader.h"
#include "core/random.h"
#include "memory/plan_report.h"
#include "memory/planner.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "synthetic_run.h"
#include "train/memory_check.h"
#include "train/trainer.h"

#include <gtest/gtest.h>

namespace gpt::test {
namespace {

TEST(Offload, OffloadedRunEqualsTheRunWithoutOffloadBitwise) {
  TempDir dir;
  struct Variant {
    std::string recipe, grad_dtype;
    int accumulation;
    std::string fp8_scaling = "delayed";
  };
  for (const Variant& v : {Variant{"fp32", "fp32", 1}, Variant{"fp32", "fp32", 2}, Variant{"bf16", "bf16", 2},
                           Variant{"fp16", "fp32", 1}, Variant{"fp8", "bf16", 2},
                           Variant{"fp8", "fp32", 1, "current"}}) {
    SCOPED_TRACE(v.recipe + " " + v.fp8_scaling + " grads " + v.grad_dtype + " accumulation " +
                 std::to_string(v.accumulation));
    Config c = offload_run(dir, "cpu", 5, 8 / v.accumulation, v.accumulation);
    // wte (152 x 32) outgrows the master staging buffer (a block's fcw, 4 x 32 x 32), so it crosses in two pieces.
    c.model.vocab_size = 150;
    c.precision.recipe = v.recipe;
    c.precision.grad_dtype = v.grad_dtype;
    c.precision.fp8_scaling = v.fp8_scaling;
    const FinishedRun offloaded = expect_offload_equals_device_bitwise(
        dir, c, v.recipe + "_" + v.fp8_scaling + "_" + std::to_string(v.accumulation));
    EXPECT_EQ(offloaded.masters_on_host, v.recipe != "fp32");
  }
}

TEST(Offload, ResumeOfAnOffloadedRunEqualsTheUninterruptedRun) {
  TempDir dir;
  for (const std::string recipe : {"fp32", "bf16", "fp8"}) {
    SCOPED_TRACE(recipe);
    Config c = offload_run(dir, "cpu", 6, 8, 1);
    c.precision.recipe = recipe;
    c.log.run_dir = dir.file("straight_" + recipe);
    Trainer straight(c, config_to_yaml(c));
    straight.run();
    EXPECT_EQ(weights_after_resume(c, 3, dir.file("resumed_" + recipe)), straight.model().parameters_to_host());
    EXPECT_EQ(logged_losses(dir.file("resumed_" + recipe)), logged_losses(c.log.run_dir));
  }
}

// bf16 with and without offload: the offloaded model's FP32 masters are the arena of the host backend, and
// on the CPU, whose device memory is the host's, the compute copy is cast from them where they are; on a
// backend whose device memory is not the host's, bf16's copy has a twin in host memory (it crosses the bus
// in BF16) and fp8's masters a staging buffer on the device. The ledger plans exactly those bytes.
TEST(Offload, UnderANarrowRecipeTheLedgerHasWhatTheCopyFromHostMastersNeedsInsteadOfTheDevicesFp32Masters) {
  TempDir dir;
  Config c = synthetic_run(dir, cycle_pattern(), 30000, false);
  c.precision.recipe = "bf16";
  c.log.run_dir = dir.file("plain");
  Trainer plain(c, config_to_yaml(c));
  Config o = c;
  o.memory.offload = "optimizer";
  o.log.run_dir = dir.file("offload");
  Trainer offloaded(o, config_to_yaml(o));
  GPT& model = offloaded.model();
  ASSERT_TRUE(model.masters_on_host());
  ASSERT_FALSE(plain.model().masters_on_host());
  EXPECT_EQ(model.master_staging_arena(), nullptr);
  EXPECT_EQ(model.host_compute_arena(), nullptr);

  auto backend = make_backend(BackendKind::Cpu, {1});
  const BackendCapabilities caps = backend->capabilities();
  const RecomputePolicy none = resolve_recompute(c.recompute, c.model.n_layer);
  const MemoryLedger lp = ledger_for(c, none, c.train.batch_size, caps),
                     lo = ledger_for(o, none, c.train.batch_size, caps);
  const uint64_t fp32 = plain.model().parameter_arena().layout().total_bytes();
  EXPECT_EQ(lp.parameters, fp32);
  EXPECT_EQ(lo.parameters, 0u);
  EXPECT_EQ(lo.master_staging, 0u);
  EXPECT_EQ(lo.host_compute_weights, 0u);
  EXPECT_EQ(lo.host_parameters, fp32);
  EXPECT_EQ(model.parameter_arena().layout().total_bytes(), fp32);
  EXPECT_EQ(lo.compute_weights, model.compute_weight_arena()->layout().total_bytes());
  EXPECT_EQ(lo.compute_weights, lp.compute_weights);
  // The device gives up the FP32 masters and the moments.
  EXPECT_EQ(lp.total() - lo.total(), fp32 + lp.optimizer);
  // The first step writes exactly the planned activations.
  EXPECT_EQ(offloaded.run().measured_activation_bytes, lo.activations());

  // Where device memory is not the host's, models built as the trainer builds them hold what the ledger plans.
  SeparateHostMemoryBackend device(*backend);
  const BackendCapabilities gpu = device.capabilities();
  for (const std::string recipe : {"bf16", "fp8"}) {
    SCOPED_TRACE(recipe);
    Config r = o;
    r.precision.recipe = recipe;
    const MemoryLedger l = ledger_for(r, none, r.train.batch_size, gpu);
    GPT m(r.model, r.train.batch_size, r.train.seq_len, device, DType::F32, none, precision_recipe(r.precision), {},
          backend.get());
    ASSERT_TRUE(m.masters_on_host());
    EXPECT_EQ(l.parameters, 0u);
    EXPECT_EQ(l.host_parameters, fp32);
    if (recipe == "bf16") {
      ASSERT_NE(m.host_compute_arena(), nullptr);
      EXPECT_EQ(m.master_staging_arena(), nullptr);
      EXPECT_EQ(l.host_compute_weights, m.host_compute_arena()->layout().total_bytes());
      EXPECT_EQ(l.host_compute_weights, l.compute_weights);
      EXPECT_EQ(l.master_staging, 0u);
      EXPECT_EQ(lp.total() - l.total(), fp32 + lp.optimizer);
    } else {
      ASSERT_NE(m.master_staging_arena(), nullptr);
      EXPECT_EQ(m.host_compute_arena(), nullptr);
      const uint64_t staging = m.master_staging_arena()->layout().total_bytes();
      EXPECT_EQ(l.master_staging, staging);
      EXPECT_EQ(l.host_compute_weights, 0u);
      // The largest block slice: fcw's 4C x C, against every FP32 weight of the model.
      const int64_t C = c.model.n_embd;
      EXPECT_EQ(staging, static_cast<uint64_t>(4 * C * C * 4));
      EXPECT_LT(staging, fp32 / 4);
      EXPECT_NE(l.table().find("FP32 staging"), std::string::npos) << l.table();
    }
  }
  // In fp32 the forward reads the FP32 weights, which stay on the device.
  Config fp32_run = o;
  fp32_run.precision.recipe = "fp32";
  EXPECT_FALSE(masters_on_host(fp32_run));
}

// Random gradients into two models from the same weights: one updated by AdamW on the device (the CPU
// backend here), the other offloaded, once with gradients staged block by block as backward's hook would,
// and over ranges cut at odd points as a ZeRO-1 shard is.
TEST(Offload, OffloadedAdamWEqualsTheDeviceUpdateOverShardsAndStagedBlocks) {
  auto backend = make_backend(BackendKind::Cpu, {1});
  auto host = make_backend(BackendKind::Cpu, {1});
  const ModelConfig m = tiny_model(16, 3, 16, 2, 8);
  GPT a(m, 2, 8, *backend), b(m, 2, 8, *backend);
  a.init_weights(5);
  b.init_weights(5);
  const ParameterLayout& layout = a.parameter_layout();
  OptimConfig config;
  config.weight_decay = 0.1;
  const std::vector<ParamRange> every_tensor = whole_tensors(layout);
  std::vector<ParamRange> shard;
  for (const ParamRange& r : every_tensor) shard.push_back({r.tensor, r.count / 3, r.count - r.count / 3 - 1});
  for (const bool whole : {true, false}) {
    SCOPED_TRACE(whole ? "every tensor, staged per block" : "a shard");
    const std::vector<ParamRange>& ranges = whole ? every_tensor : shard;
    AdamW device(config, layout, *backend, ranges);
    AdamW offloaded(config, layout, *backend, ranges, *host, DType::F32);
    EXPECT_TRUE(offloaded.offloaded());
    EXPECT_EQ(offloaded.state_bytes(), device.state_bytes());
    EXPECT_EQ(offloaded.host_master_bytes(), device.state_bytes() / 2);
    HostRng rng(11, whole ? 1 : 2);
    for (int step = 0; step < 3; ++step) {
      std::vector<float> grads(a.gradient_arena().layout().total_bytes() / 4);
      for (float& g : grads) g = static_cast<float>(rng.uniform() - 0.5);
      for (GPT* model : {&a, &b})
        backend->copy_to_device(model->gradient_arena().base(), grads.data(), grads.size() * 4);
      device.step(a.parameter_arena(), a.gradient_arena(), 1e-2, 0.7);
      if (whole)
        for (int block = m.n_layer - 1; block >= -1; --block) offloaded.stage_gradients(block, b.gradient_arena());
      // Poisoned device gradients: the staged copies, not these, must be what the update reads.
      if (whole) backend->fill({b.gradient_arena().tensor(0), std::nanf("")});
      offloaded.step(b.parameter_arena(), b.gradient_arena(), 1e-2, 0.7);
      EXPECT_EQ(a.parameters_to_host(), b.parameters_to_host()) << "step " << step;
    }
    EXPECT_EQ(offloaded.state_to_host(), device.state_to_host());
  }
}

Config planned_run() {
  Config c;
  c.model = tiny_model(64, 4, 64, 4, 32);
  c.train.batch_size = 4;
  c.train.seq_len = 32;
  return c;
}

TEST(Offload, TheLedgerPutsMastersGradientCopyAndMomentsInTheHostColumn) {
  const Config plain = planned_run();
  Config offloaded = plain;
  offloaded.memory.offload = "optimizer";
  BackendCapabilities gpu;
  gpu.device_memory_is_host = false;
  const RecomputePolicy none = resolve_recompute(plain.recompute, plain.model.n_layer);
  const MemoryLedger p = ledger_for(plain, none, 4, gpu), o = ledger_for(offloaded, none, 4, gpu);
  EXPECT_EQ(p.host_total(), 0u);
  EXPECT_EQ(o.optimizer, 0u);
  EXPECT_EQ(o.host_optimizer, p.optimizer);
  EXPECT_EQ(o.host_parameters, p.parameters);
  EXPECT_EQ(o.host_gradients, p.gradients);
  EXPECT_EQ(o.parameters, p.parameters);  // fp32: the forward reads the device's masters
  EXPECT_EQ(o.master_staging, 0u);
  EXPECT_EQ(o.total(), p.total() - p.optimizer);
  EXPECT_EQ(o.host_total(), p.parameters + p.gradients + p.optimizer);
  EXPECT_NE(o.table().find("host"), std::string::npos) << o.table();
  EXPECT_EQ(p.table().find("host"), std::string::npos) << p.table();
  EXPECT_NE(plan_report(offloaded, std::nullopt, gpu).find("memory.offload: optimizer"), std::string::npos);
}

TEST(Offload, TheBudgetPlannerOffloadsOnlyWhenNothingElseFitsAndNeverWhereDeviceMemoryIsTheHosts) {
  Config c = planned_run();
  c.train.grad_accum_steps = 1;
  BackendCapabilities gpu;
  gpu.device_memory_is_host = false;
  gpu.stores_low_precision = false;  // keep precision out of it: fp32 weights, gradients and moments
  // Below the smallest plan that keeps AdamW on the device (micro-batch 1, full recomputation with the best
  // segment length) by less than the moments.
  MemoryLedger smallest;
  for (int k = 1; k <= c.model.n_layer; ++k) {
    RecomputePolicy full;
    full.mode = RecomputeMode::Full;
    full.every = k;
    full.layers = c.model.n_layer;
    const MemoryLedger l = ledger_for(c, full, 1, gpu);
    if (k == 1 || l.total() < smallest.total()) smallest = l;
  }
  const uint64_t budget = smallest.total() - smallest.optimizer / 2;
  const MemoryChoice choice = choose_memory_plan(c, budget, gpu);
  EXPECT_EQ(choice.offload, "optimizer");
  EXPECT_LE(choice.ledger.total(), budget);
  EXPECT_GT(choice.ledger.host_optimizer, 0u);
  EXPECT_NE(choice.reason.find("offloaded to host memory"), std::string::npos) << choice.reason;
  // A budget the device-side plan fits is met without offload.
  EXPECT_EQ(choose_memory_plan(c, smallest.total(), gpu).offload, "none");
  BackendCapabilities cpu = gpu;
  cpu.device_memory_is_host = true;
  EXPECT_NE(error_message([&] { choose_memory_plan(c, budget, cpu); }).find("offload none"), std::string::npos);
}

TEST(Offload, TheHostMemoryCheckRefusesAnOffloadThatDoesNotFit) {
  Config c = planned_run();
  c.memory.offload = "optimizer";
  BackendCapabilities gpu;
  const MemoryLedger ledger = ledger_for(c, resolve_recompute(c.recompute, c.model.n_layer), 4, gpu);
  const uint64_t host = ledger.host_total();
  check_fits_host_memory(ledger, {4 * host, host}, false);
  const std::string message = error_message([&] { check_fits_host_memory(ledger, {4 * host, host - 1}, false); });
  for (const std::string part : {"of host memory", "memory.offload: optimizer keeps", "FP32 masters", "AdamW",
                                 "memory.offload: none"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  // Where device memory is the host's, the check adds the device column.
  EXPECT_THROW(check_fits_host_memory(ledger, {4 * host, host}, true), Error);
  check_fits_host_memory(ledger, {4 * host, host + ledger.total()}, true);
}

TEST(Offload, TheConfigKeyIsCheckedWithItsLine) {
  const std::string bad = error_message([] { load_config_from_string("memory:\n  offload: gradients\n", {}, "c.yaml"); });
  EXPECT_NE(bad.find("memory.offload"), std::string::npos) << bad;
  EXPECT_NE(bad.find("c.yaml:2"), std::string::npos) << bad;
  EXPECT_NE(bad.find("optimizer"), std::string::npos) << bad;
  const std::string lora = error_message([] {
    load_config_from_string("memory:\n  offload: optimizer\nfinetune:\n  lora:\n    rank: 4\n", {}, "c.yaml");
  });
  EXPECT_NE(lora.find("memory.offload"), std::string::npos) << lora;
  EXPECT_EQ(load_config_from_string("memory:\n  offload: optimizer\n", {}, "c.yaml").memory.offload, "optimizer");
}

}  // namespace
}  // namespace gpt::test

// gpt-train bench: builds the configured model, optimizer and data on a ProfilingBackend around the
// configured backend (bench_session.h), measures the GEMM peak (gemm_peak.h), runs warm-up steps and then
// timed steps with the trainer's own step runner (micro-batches, the target-token normalisation, the
// gradient reduction, the loss scaler, clipping, AdamW), and prints a report on stdout: ms/step, tokens/s,
// model FLOPs utilisation, the time of each op family and each GEMM shape, each op's memory traffic against
// the measured memory bandwidth (memory_bandwidth.h), and the first step's memory beside the ledger's.
#include "bench/bench_command.h"

#include "backend/backend.h"
#include "backend/profiling_backend.h"
#include "bench/bench_session.h"
#include "bench/memory_bandwidth.h"
#include "bench/flops.h"
#include "bench/gemm_peak.h"
#include "cli/args.h"
#include "config/config_loader.h"
#include "cpu/blas_runtime.h"
#include "cpu/onednn_matmul.h"
#include "memory/arena_usage.h"
#include "memory/planner.h"
#include "memory/recompute.h"
#include "train/memory_check.h"
#include "train/metrics.h"

#include <omp.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>

namespace gpt::bench {
namespace {

const std::vector<OptionSpec> kBenchOptions = {
    {"steps", "N", "Timed optimizer steps (default 10)."},
    {"warmup", "N", "Untimed steps before them (default 3)."},
    {"peak-reps", "N", "Timed calls per GEMM shape when measuring the peak (default 5; 0 skips the peak and MFU)."},
    {"bandwidth-reps", "N", "Timed runs when measuring the memory bandwidth (default 5; 0 skips it and each op's share)."},
    {"json", "FILE", "Also write the headline numbers as one JSON object to FILE."},
    {"set", "KEY=VALUE", "Override a config key, e.g. --set train.threads=2 (repeatable).", true},
};

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The 1-, 5- and 15-minute load averages, or "n/a".
std::string load_average() {
  const std::string line = read_first_line("/proc/loadavg");
  if (line.empty()) return "n/a";
  size_t end = 0;
  for (int field = 0; field < 3 && end != std::string::npos; ++field) end = line.find(' ', end + (field > 0));
  return line.substr(0, end);
}

double load_1min() {
  const std::string line = read_first_line("/proc/loadavg");
  return line.empty() ? NAN : std::atof(line.c_str());
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

std::string group_digits(int64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string env_or_unset(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "unset";
}

const char* proc_bind_name(omp_proc_bind_t bind) {
  switch (bind) {
    case omp_proc_bind_false: return "false";
    case omp_proc_bind_true: return "true";
    case omp_proc_bind_master: return "master";
    case omp_proc_bind_close: return "close";
    case omp_proc_bind_spread: return "spread";
  }
  return "?";
}

struct StepTimes {
  std::vector<double> ms;
  double mean() const { return std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size()); }
  double median() const {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
  double min() const { return *std::min_element(ms.begin(), ms.end()); }
  double max() const { return *std::max_element(ms.begin(), ms.end()); }
};

int run(const std::vector<std::string>& argv) {
  ParsedArgs args = parse_args("bench", argv, kBenchOptions);
  GPT_CHECK(args.positionals.size() == 1, "usage: gpt-train bench CONFIG.yaml [--steps N] [--warmup N] [--set key=value ...]");
  const int steps = args.get_int("steps", 10), warmup = args.get_int("warmup", 3), peak_reps = args.get_int("peak-reps", 5);
  const int bandwidth_reps = args.get_int("bandwidth-reps", 5);
  GPT_CHECK(steps >= 1, "--steps must be >= 1, got {}", steps);
  GPT_CHECK(warmup >= 0, "--warmup must be >= 0, got {}", warmup);
  GPT_CHECK(peak_reps >= 0, "--peak-reps must be >= 0, got {}", peak_reps);
  GPT_CHECK(bandwidth_reps >= 0, "--bandwidth-reps must be >= 0, got {}", bandwidth_reps);
  Config config = load_config(args.positionals[0], args.all("set"));
  spdlog::set_level(spdlog::level::warn);
  const std::string load_start = load_average();
  const double load_start_1min = load_1min();

  BenchSession session(std::move(config));
  const Config& cfg = session.config();
  const TrainConfig& t = cfg.train;
  const int B = t.batch_size, T = t.seq_len, K = t.grad_accum_steps;
  const int64_t step_tokens = session.tokens_per_step();
  GPT& model = session.model();
  ProfilingBackend& prof = session.profiler();
  const RecomputePolicy& policy = session.policy();

  const ModelConfig& mc = cfg.model;
  const LoraSpec lora = LoraSpec::from_config(cfg.finetune);
  const ModelFlops flops = model_flops(mc, T, lora);
  const double model_flops_per_step = flops.per_token() * static_cast<double>(step_tokens);
  const bool cpu = session.backend().device() == Device::CPU;

  fmt::print("gpt-train bench {}\n\n", args.positionals[0]);
  fmt::print("model      L{} C{} NH{} V{} (padded to {}), T{}: {} parameters, FP32 masters, precision {}; recompute: {}\n", mc.n_layer, mc.n_embd,
             mc.n_head, mc.vocab_size, mc.padded_vocab_size(), T, group_digits(model.num_parameters()), cfg.precision.recipe, policy.describe());
  fmt::print("batch      {} micro-batch(es) x B{} x T{} = {} tokens per step\n", K, B, T, step_tokens);
  fmt::print("data       {}\n", session.data_description());
  fmt::print("machine    {}, {} cores online; load average (1/5/15 min) at start: {}\n", cpu_model(), omp_get_num_procs(),
             load_start);
  if (cpu) {
    const cpu::BlasInfo blas = cpu::blas_info();
    fmt::print("threads    {} OpenMP threads; BLAS: {}\n", omp_get_max_threads(), blas.config);
    fmt::print("           BLAS kernels: {}{}\n", blas.core, blas.note.empty() ? "" : " (" + blas.note + ")");
    fmt::print("           BLAS threading: {} (openblas_get_parallel() = {}), {} threads{}\n",
               cpu::blas_parallel_name(blas.parallel), blas.parallel, blas.threads,
               blas.parallel == 2 ? ": BLAS and our own loops share libgomp's thread pool" : "");
    fmt::print("           OMP_PROC_BIND={}, OMP_PLACES={} (omp_get_proc_bind(): {})\n", env_or_unset("OMP_PROC_BIND"),
               env_or_unset("OMP_PLACES"), proc_bind_name(omp_get_proc_bind()));
    fmt::print("           narrow products: {}\n", cpu::narrow_matmul_description(cfg.precision.cpu_narrow_matmul == "exact"));
  } else {
    fmt::print("backend    {}\n", session.backend().name());
  }

  if (lora.enabled())
    fmt::print("\nmodel FLOPs per token: 4N + 6N_a = 4 x {} + 6 x {} = {:.1f} MFLOP (LoRA: the frozen weights N run "
               "forward and input-gradient products only, no weight gradient; the adapters N_a train as weights do)\n",
               group_digits(flops.counted_parameters), group_digits(flops.adapter_parameters),
               flops.dense_per_token / 1e6);
  else
    fmt::print("\nmodel FLOPs per token: 6N = 6 x {} = {:.1f} MFLOP (N: every parameter but the position embedding, "
               "a lookup; nanoGPT's convention)\n",
               group_digits(flops.counted_parameters), flops.dense_per_token / 1e6);
  fmt::print("                     + 12 L T C = {:.1f} MFLOP (attention; the full T x T square, causal masking not "
             "discounted)\n",
             flops.attention_per_token / 1e6);
  fmt::print("                     = {:.1f} MFLOP/token, {:.2f} GFLOP/step\n", flops.per_token() / 1e6,
             model_flops_per_step / 1e9);

  // The peak, at the model's GEMM shapes.
  std::vector<GemmShape> shapes = model_gemm_shapes(mc, B, T, K, lora);
  std::optional<GemmPeak> peak;
  if (cpu && peak_reps > 0) {
    peak = measure_gemm_peak(shapes, peak_reps);
    fmt::print("\nmatrix-product peak: cblas_sgemm at the model's shapes, {} threads, best of {} calls each\n",
               omp_get_max_threads(), peak_reps);
    fmt::print("  {:<44} {:>6} {:>6} {:>6} {:>4} {:>5} {:>9} {:>9}\n", "GEMM", "m", "n", "k", "op", "/step", "GFLOP/st",
               "GFLOP/s");
    for (const GemmRate& r : peak->rates) {
      const GemmShape& s = r.shape;
      fmt::print("  {:<44} {:>6} {:>6} {:>6} {:>4} {:>5} {:>9.2f} {:>9.1f}\n", s.name, s.m, s.n, s.k,
                 fmt::format("{}{}", s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N'), s.per_step,
                 s.flops() * static_cast<double>(s.per_step) / 1e9, r.gflops);
    }
    fmt::print("  FLOP-weighted peak: {:.1f} GFLOP/s ({:.2f} GFLOP of GEMMs per step would take {:.1f} ms)\n",
               peak->weighted_gflops(), peak->step_flops / 1e9, peak->step_seconds_at_peak * 1e3);
  } else {
    fmt::print("\nmatrix-product peak: not measured ({})\n", cpu ? "--peak-reps 0" : "cblas_sgemm measures the CPU only");
  }

  // The memory bandwidth, on the CPU in host buffers of its own (four of 128 MiB), on a device in the
  // activation arena before the first step writes it (it is poisoned afterwards, so the memory check below is
  // unchanged): buffers several times any CPU's or GPU's last-level cache.
  std::optional<MemoryBandwidth> bandwidth;
  if (bandwidth_reps > 0) {
    Arena& arena = model.activation_arena();
    bandwidth = cpu ? measure_host_bandwidth(size_t{128} << 20, bandwidth_reps)
                    : measure_device_copy_bandwidth(session.backend(), arena.base(), arena.layout().total_bytes(),
                                                    size_t{256} << 20, bandwidth_reps);
    const double buffer_mib = static_cast<double>(bandwidth->buffer_bytes) / (1 << 20);
    fmt::print("\nmemory bandwidth: {:.1f} GB/s, the best of {} runs of {}, {:.1f} MiB buffers{}, counting each byte "
               "read and written\n",
               bandwidth->gbs(), bandwidth_reps, bandwidth->method, buffer_mib,
               buffer_mib < 64 ? " (the activation arena is small: a cache may hold them, and the rate be the cache's)" : "");
  } else {
    fmt::print("\nmemory bandwidth: not measured (--bandwidth-reps 0)\n");
  }

  // Steps: the trainer's (step_runner.h). The first one (warm-up or timed; poisoning and scanning are outside
  // its timing) also measures what it wrote of the activation arena and what the backend holds for itself,
  // to set beside the ledger.
  StepResult last;
  // memory.offload: the timed steps' host update, during which the device waits, and AdamW's part of it.
  double host_optimizer_ms = 0.0, host_adamw_ms = 0.0;
  auto step = [&]() -> double {
    last = session.step();
    host_optimizer_ms += last.host_optimizer_ms;
    host_adamw_ms += last.host_adamw_ms;
    return last.ms;
  };
  const MemoryLedger planned = ledger_for(cfg, policy, B, session.backend().capabilities());
  // The op times and FLOPs cover the timed steps: from here when the first step is timed (--warmup 0),
  // else from the end of the warm-up.
  const auto start_counting = [&] {
    prof.reset();
    model.reset_flops();
  };
  if (warmup == 0) start_counting();
  poison_arena(model.activation_arena(), prof);
  const std::optional<DeviceMemoryUse> device_before = prof.device_memory();
  const double first_ms = step();
  const MeasuredMemory measured = measure_step_memory(model.activation_arena(), prof, device_before);
  const PlannedVsMeasured memory = compare_with_ledger(planned, measured);
  for (int i = 1; i < warmup; ++i) step();
  if (warmup > 0) start_counting();
  host_optimizer_ms = warmup == 0 ? last.host_optimizer_ms : 0.0;
  host_adamw_ms = warmup == 0 ? last.host_adamw_ms : 0.0;
  StepTimes times;
  const double cpu_start = ProfilingBackend::process_cpu_seconds();
  if (warmup == 0) times.ms.push_back(first_ms);
  for (int i = warmup == 0 ? 1 : 0; i < steps; ++i) times.ms.push_back(step());
  const double cpu_ms = (ProfilingBackend::process_cpu_seconds() - cpu_start) * 1e3 / steps;
  const double recompute_per_step = model.flops().recompute / steps;
  // On a device the timed steps above pay for a synchronize() around every op (hundreds a step, each a
  // round trip to the GPU), the price of the breakdown below; as many steps again with the profiler off
  // queue their ops as training does, and give the rate training runs at. On the CPU synchronize() is free
  // and the timed steps are already that.
  StepTimes unprofiled;
  if (!cpu) {
    prof.set_enabled(false);
    for (int i = 0; i < steps; ++i) unprofiled.ms.push_back(session.step().ms);
    prof.set_enabled(true);
  }
  const double training_ms = unprofiled.ms.empty() ? times.mean() : unprofiled.mean();
  const std::string load_end = load_average();

  const double mean_s = times.mean() / 1e3;
  const double achieved = model_flops_per_step / mean_s;
  fmt::print("\nsteps      {} warm-up, {} timed; load average at end: {}; last loss {:.4f}, gradient norm {:.4f}{}\n",
             warmup, steps, load_end, last.loss, last.grad_norm, last.applied ? "" : " (update not applied)");
  for (const std::string& line : memory.lines) fmt::print("memory     {}\n", line);
  for (const std::string& note : memory.notes) fmt::print("memory     {}\n", note);
  if (cfg.memory.offload != "none")
    fmt::print("offload    host AdamW {:.1f} ms a step; the device waits for the host {:.1f} ms a step, {:.1f}% of the "
               "step (from the norm until the weights' copies are queued)\n",
               host_adamw_ms / steps, host_optimizer_ms / steps, 100.0 * host_optimizer_ms / steps / times.mean());
  if (cpu) {
    const std::vector<std::string> kernels = cpu::onednn_kernels_used();
    if (!kernels.empty()) fmt::print("oneDNN     matmul implementations chosen: {}\n", fmt::join(kernels, ", "));
  }
  fmt::print("ms/step    mean {:.1f} | median {:.1f} | min {:.1f} | max {:.1f}\n", times.mean(), times.median(),
             times.min(), times.max());
  fmt::print("cpu        {:.1f} ms of CPU time per step: {:.2f} of {} threads busy on average (fewer than the threads: "
             "serial work, or cores taken by other processes)\n",
             cpu_ms, cpu_ms / times.mean(), omp_get_max_threads());
  fmt::print("tokens/s   {:.1f}\n", static_cast<double>(step_tokens) / mean_s);
  if (!unprofiled.ms.empty())
    fmt::print("unprofiled {} more steps without the synchronize() around each op: ms/step mean {:.1f} | median {:.1f} | "
               "min {:.1f}; tokens/s {:.1f}, {:.1f} model GFLOP/s: the rate training runs at (the figures above and the "
               "breakdown below pay for the synchronisation)\n",
               steps, training_ms, unprofiled.median(), unprofiled.min(), static_cast<double>(step_tokens) / (training_ms / 1e3),
               model_flops_per_step / (training_ms / 1e3) / 1e9);
  fmt::print("model      {:.1f} GFLOP/s achieved", achieved / 1e9);
  if (peak) fmt::print("; MFU {:.1f}% of the measured {:.1f} GFLOP/s peak", 100.0 * achieved / 1e9 / peak->weighted_gflops(),
                       peak->weighted_gflops());
  fmt::print("\n");
  if (peak && flops.attention_per_token > 0.0) {
    // Causal masking skips half of the T x T products; counting only that half shows how much of the MFU
    // above is the convention's (it matters when 12 L T C is a large part of the FLOPs, i.e. T >> C).
    const double causal =
        (model_flops_per_step - 0.5 * flops.attention_per_token * static_cast<double>(step_tokens)) / mean_s;
    fmt::print("           with attention counted causally (6 L T C): {:.1f} GFLOP/s, MFU {:.1f}%\n", causal / 1e9,
               100.0 * causal / 1e9 / peak->weighted_gflops());
  }
  if (recompute_per_step > 0.0) {
    const double hardware = model_flops_per_step + recompute_per_step;
    fmt::print("recompute  {:.2f} GFLOP/step rerun by activation recomputation (not model FLOPs); with them {:.1f} "
               "GFLOP/s{}\n",
               recompute_per_step / 1e9, hardware / mean_s / 1e9,
               peak ? fmt::format(", {:.1f}% of the peak", 100.0 * hardware / mean_s / 1e9 / peak->weighted_gflops()) : "");
  }

  // Where the time goes.
  const double step_ms = times.mean();
  auto per_step_ms = [&](double seconds) { return seconds * 1e3 / steps; };
  fmt::print("\ntime by op, per step (each op timed between two synchronize() calls; cpu ms: CPU time of all threads;\n"
             "MB: the bytes of the op's tensors, each read or written once; GB/s: those bytes over the op's time, and\n"
             "of bw: that rate against the measured memory bandwidth, above 100% where the data came from cache;\n"
             "for every op but the matrix products):\n");
  fmt::print("  {:<30} {:>9} {:>7} {:>9} {:>7} {:>9} {:>8} {:>6}\n", "", "ms", "share", "cpu ms", "calls", "MB", "GB/s",
             "of bw");
  // An op's traffic per step and its rate; none for host copies and matrix products (whose rate is FLOPs).
  auto traffic_columns = [&](const OpTiming& op, bool matmul) -> std::string {
    if (matmul || op.bytes <= 0.0 || op.seconds <= 0.0) return fmt::format(" {:>9} {:>8} {:>6}", "-", "-", "-");
    const double gbs = op.bytes / op.seconds / 1e9;
    return fmt::format(" {:>9.1f} {:>8.1f} {:>6}", op.bytes / steps / 1e6, gbs,
                       bandwidth ? fmt::format("{:.0f}%", 100.0 * gbs / bandwidth->gbs()) : "-");
  };
  double ops_ms = 0.0, memory_bound_ms = 0.0, memory_bound_bytes = 0.0;
  for (int c = 0; c < kNumOpCategories; ++c) {
    const auto category = static_cast<OpCategory>(c);
    const OpTiming total = prof.category_timing(category);
    if (total.calls == 0) continue;
    ops_ms += per_step_ms(total.seconds);
    const bool matmul = category == OpCategory::Matmul;
    // The summary below leaves attention out with the products: its cost grows as T^2 against its tensors'
    // T (FLOPs, where fused; the scratch it keeps to itself, where not).
    const bool memory_bound = !matmul && category != OpCategory::Attention;
    fmt::print("  {:<30} {:>9.1f} {:>6.1f}% {:>9.1f} {:>7}{}\n", op_category_name(category), per_step_ms(total.seconds),
               100.0 * per_step_ms(total.seconds) / step_ms, per_step_ms(total.cpu_seconds), total.calls / steps,
               traffic_columns(total, matmul));
    for (int o = 0; o < kNumProfiledOps; ++o) {
      const auto op = static_cast<ProfiledOp>(o);
      const OpTiming& ot = prof.timing(op);
      if (profiled_op_category(op) != category || ot.calls == 0) continue;
      // Host copies move no memory traffic (their bytes cross the bus): neither their time nor bytes count.
      if (memory_bound && ot.bytes > 0.0) {
        memory_bound_ms += per_step_ms(ot.seconds);
        memory_bound_bytes += ot.bytes / steps;
      }
      fmt::print("    {:<28} {:>9.1f} {:>6.1f}% {:>9.1f} {:>7}{}\n", profiled_op_name(op), per_step_ms(ot.seconds),
                 100.0 * per_step_ms(ot.seconds) / step_ms, per_step_ms(ot.cpu_seconds), ot.calls / steps,
                 traffic_columns(ot, matmul));
    }
  }
  fmt::print("  {:<30} {:>9.1f} {:>6.1f}%\n", "host work between ops", step_ms - ops_ms, 100.0 * (step_ms - ops_ms) / step_ms);
  if (bandwidth && memory_bound_bytes > 0.0) {
    const double at_bandwidth_ms = memory_bound_bytes / (bandwidth->gbs() * 1e9) * 1e3;
    fmt::print("  every op but the matrix products and attention: {:.1f} MB a step in {:.1f} ms, which at the measured "
               "bandwidth would take {:.1f} ms ({:.0f}% of it reached)\n",
               memory_bound_bytes / 1e6, memory_bound_ms, at_bandwidth_ms, 100.0 * at_bandwidth_ms / memory_bound_ms);
  }
  if (flops.attention_per_token > 0.0) {
    fmt::print("  attention: {:.1f}% of the time for {:.1f}% of the model FLOPs\n",
               100.0 * per_step_ms(prof.category_timing(OpCategory::Attention).seconds) / step_ms,
               100.0 * flops.attention_per_token / flops.per_token());
  }

  // GEMMs: achieved rate against the peak at the same shape.
  fmt::print("\nmatrix products by shape, per step:\n");
  fmt::print("  {:<44} {:>9} {:>9} {:>9}\n", "GEMM", "ms", "GFLOP/s", "of peak");
  double gemm_flops = 0.0, gemm_seconds = 0.0;
  for (const MatmulShapeTiming& s : prof.matmul_shapes()) {
    if (s.calls == 0) continue;
    std::string name = fmt::format("[{}x{}x{} {}{}]", s.m, s.n, s.k, s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N');
    std::string of_peak = "-";
    for (size_t i = 0; i < shapes.size(); ++i) {
      const GemmShape& g = shapes[i];
      if (g.m != s.m || g.n != s.n || g.k != s.k || g.trans_a != s.trans_a || g.trans_b != s.trans_b) continue;
      name = g.name;
      if (peak) of_peak = fmt::format("{:.0f}%", 100.0 * (s.flops() / s.seconds / 1e9) / peak->rates[i].gflops);
    }
    gemm_flops += s.flops();
    gemm_seconds += s.seconds;
    fmt::print("  {:<44} {:>9.1f} {:>9.1f} {:>9}\n", name, per_step_ms(s.seconds), s.flops() / s.seconds / 1e9, of_peak);
  }
  if (gemm_seconds > 0.0) {
    fmt::print("  all matrix products: {:.1f} GFLOP/s{}\n", gemm_flops / gemm_seconds / 1e9,
               peak ? fmt::format(", {:.0f}% of the FLOP-weighted peak", 100.0 * gemm_flops / gemm_seconds / 1e9 /
                                                                              peak->weighted_gflops())
                    : "");
  }
  if (cpu) {
    fmt::print("\nthread placement: libgomp reads OMP_PROC_BIND and OMP_PLACES once, at start-up, so they are set "
               "before starting, e.g. OMP_PROC_BIND=close OMP_PLACES=cores to keep each thread (and the BLAS, which "
               "runs on the same pool) on one core of a dedicated machine; on a shared one leave them unset, as a "
               "pinned thread cannot leave a core another process holds.\n");
  }

  if (args.has("json")) {
    JsonLine json;
    json.add("config", args.positionals[0])
        .add("steps", static_cast<int64_t>(steps))
        .add("tokens_per_step", step_tokens)
        .add("recompute", policy.describe())
        .add("planned_activation_bytes", static_cast<int64_t>(planned.activations()))
        .add("measured_activation_bytes", static_cast<int64_t>(measured.activations))
        .add("planned_backend_workspace_bytes", static_cast<int64_t>(planned.backend_workspace))
        .add("measured_backend_workspace_bytes", static_cast<int64_t>(measured.backend_workspace))
        .add("planned_device_bytes", static_cast<int64_t>(planned.total()));
    if (measured.device_after)
      json.add("held_device_bytes", static_cast<int64_t>(measured.device_after->held))
          .add("used_device_bytes", static_cast<int64_t>(measured.device_after->used));
    json
        .add("last_loss", last.loss)
        .add("last_grad_norm", last.grad_norm)
        .add("ms_per_step", times.mean())
        .add("ms_per_step_median", times.median())
        .add("tokens_per_s", static_cast<double>(step_tokens) / mean_s)
        .add("ms_per_step_unprofiled", training_ms)
        .add("tokens_per_s_unprofiled", static_cast<double>(step_tokens) / (training_ms / 1e3))
        .add("cpu_ms_per_step", cpu_ms)
        .add("model_gflop_per_step", model_flops_per_step / 1e9)
        .add("achieved_gflops", achieved / 1e9)
        .add("load_1min_start", load_start_1min)
        .add("load_1min_end", load_1min());
    if (peak) json.add("peak_gflops", peak->weighted_gflops()).add("mfu", achieved / 1e9 / peak->weighted_gflops());
    if (bandwidth) json.add("bandwidth_gbs", bandwidth->gbs());
    json.add("ms_memory_bound", memory_bound_ms).add("mb_memory_bound", memory_bound_bytes / 1e6);
    constexpr const char* kKeys[kNumOpCategories] = {"matmul", "attention", "layernorm", "gelu", "softmax",
                                                     "optimizer", "embedding", "residual", "other"};
    for (int c = 0; c < kNumOpCategories; ++c) {
      const OpTiming total = prof.category_timing(static_cast<OpCategory>(c));
      json.add(fmt::format("ms_{}", kKeys[c]), per_step_ms(total.seconds));
      json.add(fmt::format("cpu_ms_{}", kKeys[c]), per_step_ms(total.cpu_seconds));
      json.add(fmt::format("mb_{}", kKeys[c]), total.bytes / steps / 1e6);
    }
    json.add("ms_host", step_ms - ops_ms);
    json.add("offload", cfg.memory.offload)
        .add("ms_host_optimizer", host_optimizer_ms / steps)
        .add("ms_host_adamw", host_adamw_ms / steps);
    std::ofstream out(args.get("json"));
    out << json.str() << "\n";
    GPT_CHECK(out.good(), "cannot write '{}'", args.get("json"));
  }
  return 0;
}

}  // namespace

int run_bench_command(const std::vector<std::string>& args) { return run(args); }

std::string bench_help() {
  return "usage: gpt-train bench CONFIG.yaml [--steps N] [--warmup N] [--set key=value ...]\n\n"
         "Time training steps of the configured model (the train data, or random tokens when it cannot be read) and\n"
         "report ms/step, tokens/s, model FLOPs utilisation against the matrix-product peak measured on the spot\n"
         "(cblas_sgemm at the model's GEMM shapes and thread count), and where the time goes by op and by GEMM\n"
         "shape, with each op's memory traffic against the memory bandwidth measured on the spot. On a GPU it also\n"
         "times as many steps again with the profiler off, whose synchronisations slow a step (the unprofiled line).\n"
         "train.grad_accum_steps (or train.global_batch_tokens) sets the micro-batches per step; memory.budget is\n"
         "not applied. Check the machine's load first: other processes skew every number.\n\n"
         "options:\n" +
         options_help(kBenchOptions);
}

}  // namespace gpt::bench

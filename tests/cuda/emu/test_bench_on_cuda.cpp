// `gpt-train bench` with train.backend cuda, as scripts/gpu_check.sh runs each of its benchmark rows (the
// same config, flags and overrides, on a model small enough for the emulator): the command succeeds and its
// JSON has what the script's table reads (the headline from the steps run without the profiler's
// synchronisation), with the memory as planned and the bandwidth measured inside the activation arena. The rows' figures exist only on a GPU; this keeps the command they come from working.
#include "command_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>

namespace gpt::test {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The numeric fields of bench's one-line JSON object.
std::map<std::string, double> numbers(const std::string& json) {
  std::map<std::string, double> out;
  const std::regex field("\"([a-z_0-9]+)\":(-?[0-9][0-9.eE+-]*)");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), field); it != std::sregex_iterator(); ++it)
    out[(*it)[1].str()] = std::stod((*it)[2].str());
  return out;
}

TEST(BenchOnCuda, GpuChecksRowsRunAndReportWhatItsTableReads) {
  TempDir dir;
  // gpu_check.sh's data flags and row overrides, on a 2-block model of width 32 with a 256-token vocabulary.
  const std::string common =
      std::string(GPT_TRAIN_EMU_EXE) + " bench " + GPT_SOURCE_DIR + "/configs/gpt2-124m.yaml --steps 2 --warmup 1 "
      "--peak-reps 0 --bandwidth-reps 2 --set data.train=/nonexistent/train_*.bin --set data.val= --set train.seq_len=16 "
      "--set train.eval_every=0 --set model.n_layer=2 --set model.n_head=2 --set model.n_embd=32 "
      "--set model.vocab_size=256 --set train.backend=cuda --set train.batch_size=2";
  struct Row {
    const char* name;
    const char* overrides;
  };
  const Row rows[] = {
      {"bf16_none", "--set precision.recipe=bf16 --set recompute.mode=none"},
      {"fp8_selective", "--set precision.recipe=fp8 --set recompute.mode=selective"},
      {"bf16_offload", "--set precision.recipe=bf16 --set memory.offload=optimizer"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const std::string json_path = dir.file(std::string(row.name) + ".json");
    const CommandResult r = run_command(common + " " + row.overrides + " --json " + json_path + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("memory bandwidth: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("copy op, device to device"), std::string::npos) << r.output;
    std::map<std::string, double> f = numbers(read_text(json_path));
    EXPECT_NE(r.output.find("unprofiled 2 more steps without the synchronize() around each op"), std::string::npos)
        << r.output;
    for (const char* key : {"tokens_per_s", "ms_per_step", "tokens_per_s_unprofiled", "ms_per_step_unprofiled",
                            "model_gflop_per_step", "ms_matmul", "ms_attention",
                            "ms_memory_bound", "mb_memory_bound", "bandwidth_gbs", "planned_device_bytes",
                            "held_device_bytes", "used_device_bytes"})
      EXPECT_GT(f[key], 0.0) << key;
    EXPECT_EQ(f["planned_activation_bytes"], f["measured_activation_bytes"]);
    EXPECT_EQ(f["planned_device_bytes"], f["held_device_bytes"]);
    if (std::string(row.name) == "bf16_offload") {
      EXPECT_GT(f["ms_host_optimizer"], 0.0);
      EXPECT_GT(f["ms_host_adamw"], 0.0);
    }
  }
}

}  // namespace
}  // namespace gpt::test

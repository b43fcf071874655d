// `gpt-train report` on real (tiny) training runs: the PNG is a PNG of the promised size, the SVG is XML whose
// text holds the titles and the legend, several runs share one picture, and a directory without metrics is
// named in a clear error. log.report draws during training, and a failure to draw does not stop it.
#include "command_util.h"
#include "config/config_loader.h"
#include "report/report_plot.h"
#include "report/run_metrics.h"
#include "report/run_report.h"
#include "train/synthetic_run.h"
#include "train/trainer.h"

#include <expat.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>


namespace gpt::test {
namespace {

namespace fs = std::filesystem;

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

uint32_t big_endian(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// The PNG signature, then the IHDR chunk first, as the PNG specification orders them.
void expect_png(const fs::path& path, uint32_t width, uint32_t height) {
  const std::string png = file_bytes(path);
  ASSERT_GT(png.size(), 33u) << path;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(big_endian(png, 8), 13u);  // IHDR's length
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  EXPECT_EQ(big_endian(png, 16), width);
  EXPECT_EQ(big_endian(png, 20), height);
  EXPECT_EQ(png.substr(png.size() - 8, 4), "IEND");
}

// The text of every <text> element of an SVG, each as one string (PLplot writes the characters as
// character references, which the parser decodes); fails the test when the file is not well-formed XML.
std::vector<std::string> svg_texts(const fs::path& path) {
  struct State {
    int depth_in_text = 0;
    std::vector<std::string> texts;
    std::string root;
  } state;
  XML_Parser parser = XML_ParserCreate("UTF-8");
  XML_SetUserData(parser, &state);
  XML_SetElementHandler(
      parser,
      [](void* data, const XML_Char* name, const XML_Char**) {
        auto& s = *static_cast<State*>(data);
        if (s.root.empty()) s.root = name;
        if (std::string(name) == "text" && s.depth_in_text++ == 0) s.texts.emplace_back();
      },
      [](void* data, const XML_Char* name) {
        auto& s = *static_cast<State*>(data);
        if (std::string(name) == "text") --s.depth_in_text;
      });
  XML_SetCharacterDataHandler(parser, [](void* data, const XML_Char* text, int length) {
    auto& s = *static_cast<State*>(data);
    if (s.depth_in_text > 0) s.texts.back().append(text, static_cast<size_t>(length));
  });
  const std::string svg = file_bytes(path);
  const bool ok = XML_Parse(parser, svg.data(), static_cast<int>(svg.size()), /*isFinal=*/1) == XML_STATUS_OK;
  EXPECT_TRUE(ok) << path << ": " << XML_ErrorString(XML_GetErrorCode(parser)) << " at line "
                  << XML_GetCurrentLineNumber(parser);
  XML_ParserFree(parser);
  EXPECT_EQ(state.root, "svg");
  return state.texts;
}

bool has_text_containing(const std::vector<std::string>& texts, const std::string& part) {
  for (const auto& t : texts)
    if (t.find(part) != std::string::npos) return true;
  return false;
}

// A few steps of a tiny model with validation every 2 steps, into dir/name.
Config tiny_run(const TempDir& dir, const std::string& name, double lr) {
  Config c = synthetic_run(dir, permutation_pattern(), 4000);
  c.train.steps = 6;
  c.train.eval_every = 2;
  c.train.threads = 1;
  c.optim.lr = lr;
  c.optim.warmup_steps = 2;
  c.log.run_dir = dir.file(name);
  return c;
}

void train(const Config& c) {
  Trainer trainer(c, config_to_yaml(c));
  ASSERT_EQ(trainer.run().status, TrainStatus::Completed);
}

TEST(RunReport, ATrainingRunGivesAPngAndAnSvgWithTitlesAndLegend) {
  TempDir dir;
  const Config c = tiny_run(dir, "run", 1e-2);
  train(c);
  const RunMetrics metrics = read_run_metrics(c.log.run_dir);
  EXPECT_EQ(metrics.loss.step.size(), 6u);
  EXPECT_EQ(metrics.val_loss.step.size(), 3u);
  EXPECT_EQ(metrics.peak_rss_bytes.step.size(), 6u);
  ASSERT_TRUE(metrics.memory_planned_bytes && metrics.activations_planned_bytes && metrics.activations_measured_bytes);
  EXPECT_EQ(*metrics.activations_measured_bytes, *metrics.activations_planned_bytes);
  EXPECT_NE(metrics.settings.find("fp32, B8 x T16 x K1"), std::string::npos) << metrics.settings;

  const ReportFiles files = write_run_report({c.log.run_dir}, dir.file("out/picture"));
  EXPECT_EQ(files.png, dir.file("out/picture.png"));
  expect_png(files.png, kReportWidth, kReportHeight);
  const auto texts = svg_texts(files.svg);
  for (const char* title : {"gpt-train report: run", "Loss: train (solid), validation (dashed)", "Learning rate",
                            "Gradient norm before clipping", "Throughput", "Memory: planned (dashed), measured (solid)",
                            "cross-entropy (nats/token)", "tokens/s", "MiB", "step", "Runs", "validation loss",
                            "run: fp32, B8 x T16 x K1", "steps 1-6: loss "})
    EXPECT_TRUE(has_text_containing(texts, title)) << title;
}

TEST(RunReport, SeveralRunsShareOnePictureEachWithItsOwnLabel) {
  TempDir dir;
  train(tiny_run(dir, "a/run", 1e-2));
  train(tiny_run(dir, "b/run", 3e-3));
  train(tiny_run(dir, "slow", 1e-3));
  const ReportFiles files = write_run_report({dir.file("a/run"), dir.file("b/run"), dir.file("slow")}, dir.file("cmp"));
  expect_png(files.png, kReportWidth, kReportHeight);
  const auto texts = svg_texts(files.svg);
  // The same directory name twice: the labels take in the parent, so each run stays recognisable.
  EXPECT_TRUE(has_text_containing(texts, "gpt-train report: a/run, b/run, slow")) << texts.front();
  for (const char* label : {"a/run: fp32", "b/run: fp32", "slow: fp32, B8 x T16 x K1, recompute none, lr 0.001"})
    EXPECT_TRUE(has_text_containing(texts, label)) << label;
}

TEST(RunReport, ADirectoryWithoutMetricsIsNamed) {
  TempDir dir;
  EXPECT_NE(error_message([&] { write_run_report({dir.file("missing")}, dir.file("r")); })
                .find("'" + dir.file("missing") + "' is not a directory"),
            std::string::npos);
  fs::create_directories(dir.path() / "empty");
  const std::string none = error_message([&] { write_run_report({dir.file("empty")}, dir.file("r")); });
  EXPECT_NE(none.find("'" + dir.file("empty") + "' has no metrics: there is no metrics.jsonl in it"),
            std::string::npos)
      << none;
  std::ofstream(dir.path() / "empty" / "metrics.jsonl") << "{\"step\":3,\"val_loss\":2.5}\n{\"step\":4,\"lo";
  const std::string no_steps = error_message([&] { write_run_report({dir.file("empty")}, dir.file("r")); });
  EXPECT_NE(no_steps.find("has no metrics: its metrics.jsonl holds no training step (2 line(s), 1 unreadable)"),
            std::string::npos)
      << no_steps;
  EXPECT_FALSE(fs::exists(dir.path() / "r.png"));
}

TEST(RunReport, NonFiniteValuesAndATornLastLineStillDraw) {
  TempDir dir;
  fs::create_directories(dir.path() / "run");
  std::ofstream(dir.path() / "run" / "metrics.jsonl")
      << "{\"step\":1,\"loss\":5.5,\"lr\":0.001,\"grad_norm\":null,\"tokens_per_s\":100}\n"
         "{\"step\":2,\"loss\":null,\"lr\":0.001,\"grad_norm\":3,\"tokens_per_s\":120}\n"
         "{\"step\":3,\"loss\":0.2,\"lr\":0.001,\"grad_norm\":0.01,\"tokens_per_s\":110}\n{\"step\":4,\"lo";
  const RunMetrics run = read_run_metrics(dir.file("run"));
  EXPECT_EQ(run.unreadable_lines, 1u);
  EXPECT_TRUE(std::isnan(run.loss.value[1]));
  EXPECT_TRUE(run.settings.empty());  // no config.yaml
  const ReportFiles files = write_run_report({dir.file("run")}, dir.file("run/report"));
  expect_png(files.png, kReportWidth, kReportHeight);
  const auto texts = svg_texts(files.svg);
  // A loss falling over more than a decade is drawn on a log axis; so is the gradient norm.
  EXPECT_TRUE(has_text_containing(texts, "Loss: train (solid), validation (dashed) (log scale)"));
  EXPECT_TRUE(has_text_containing(texts, "Gradient norm before clipping (log scale)"));
  EXPECT_TRUE(has_text_containing(texts, "no memory records in these runs"));
}

// A run on a backend with device memory (the records the CUDA backend's trainer writes): the memory panel
// measures the device bytes the run holds against the plan and draws the device's own count beside them,
// and the legend says both, with the host's peak.
TEST(RunReport, ADeviceRunIsMeasuredByItsDeviceMemory) {
  TempDir dir;
  fs::create_directories(dir.path() / "gpu");
  constexpr double kMiB = 1024.0 * 1024.0;
  std::ofstream out(dir.path() / "gpu" / "metrics.jsonl");
  out << fmt::format("{{\"step\":1,\"memory_planned_bytes\":{0},\"activations_planned_bytes\":1024,"
                     "\"activations_measured_bytes\":1024,\"device_total_bytes\":{1}}}\n",
                     40.5 * kMiB, 80.0 * 1024 * kMiB);
  for (int step = 1; step <= 3; ++step)
    out << fmt::format("{{\"step\":{0},\"loss\":{1},\"lr\":0.001,\"grad_norm\":1,\"tokens_per_s\":100,"
                       "\"peak_rss_bytes\":{2},\"device_held_bytes\":{3},\"device_used_bytes\":{4}}}\n",
                       step, 3.0 - 0.1 * step, 300.0 * kMiB, 40.5 * kMiB, 81.0 * kMiB);
  out.close();
  const RunMetrics run = read_run_metrics(dir.file("gpu"));
  ASSERT_EQ(run.device_held_bytes.value.size(), 3u);
  ASSERT_EQ(run.device_used_bytes.value.size(), 3u);
  ASSERT_TRUE(run.device_total_bytes.has_value());
  EXPECT_EQ(run.device_held_bytes.value[2], *run.memory_planned_bytes);
  const ReportFiles files = write_run_report({dir.file("gpu")}, dir.file("gpu/report"));
  expect_png(files.png, kReportWidth, kReportHeight);
  const auto texts = svg_texts(files.svg);
  for (const char* text : {"Memory: planned (dashed), measured (solid)",
                           "memory: device 40.5 MiB as planned, activations as planned",
                           "device in use 81.0 MiB of 80.00 GiB, host peak 300.0 MiB",
                           "train loss; memory measured (device bytes the run holds)",
                           "device memory in use (cudaMemGetInfo)"})
    EXPECT_TRUE(has_text_containing(texts, text)) << text;
}

TEST(RunReport, TrainingWithLogReportDrawsAtCheckpointsAndAFailureOnlyWarns) {
  TempDir dir;
  Config c = tiny_run(dir, "run", 1e-2);
  c.log.report = true;
  c.checkpoint.every = 2;
  train(c);
  expect_png(dir.path() / "run" / "report.png", kReportWidth, kReportHeight);
  EXPECT_TRUE(has_text_containing(svg_texts(dir.path() / "run" / "report.svg"), "steps 1-6: loss "));

  // report.png a directory: the report cannot be written, and training still completes.
  Config blocked = tiny_run(dir, "blocked", 1e-2);
  blocked.log.report = true;
  fs::create_directories(dir.path() / "blocked" / "report.png");
  train(blocked);
  EXPECT_TRUE(fs::exists(dir.path() / "blocked" / "checkpoints" / "step_00000006"));
}

TEST(RunReport, TheCommandWritesBothFilesAndExplainsAMissingRun) {
  TempDir dir;
  train(tiny_run(dir, "run", 1e-2));
  CommandResult r = run_cli("report " + dir.file("run"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  expect_png(dir.path() / "run" / "report.png", kReportWidth, kReportHeight);
  EXPECT_TRUE(fs::exists(dir.path() / "run" / "report.svg"));
  r = run_cli("report " + dir.file("run") + " " + dir.file("nothing") + " --out " + dir.file("x.png"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("'" + dir.file("nothing") + "' is not a directory"), std::string::npos) << r.output;
  r = run_cli("report");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("usage: gpt-train report RUN_DIR"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gpt::test

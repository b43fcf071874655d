#include "io/hf_gpt2.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "cpu/gradcheck.h"
#include "io/durable_file.h"
#include "io/llmc_model_file.h"
#include "io/safetensors.h"
#include "model/gpt.h"
#include "precision/float_formats.h"
#include "test_util.h"

namespace gpt::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Vocabulary 61 padded to 64, 2 layers, 16 channels, 2 heads, 8 positions: the Python reference's shape.
ModelConfig hf_tiny() { return tiny_model(61, 2, 16, 2, 8); }

std::vector<float> random_params(const ModelConfig& m, uint64_t seed) {
  GPT model(m, 1, m.context_length, cpu_backend());
  model.init_weights(seed);
  return model.parameters_to_host();
}

// Logits of every position of tokens (one sequence), from our model with these weights.
std::vector<std::vector<float>> our_logits(const ModelConfig& m, std::span<const float> params,
                                           const std::vector<int32_t>& tokens) {
  const int T = static_cast<int>(tokens.size());
  GPT model(m, 1, T, cpu_backend());
  model.parameters_from_host(params);
  StepContext ctx;
  ctx.training = false;
  model.forward(tokens, {}, 1, T, ctx);
  std::vector<std::vector<float>> out;
  for (int t = 0; t < T; ++t) out.push_back(model.logits_at(0, t));
  return out;
}

TEST(HfGpt2, ExportThenImportGivesIdenticalWeights) {
  TempDir dir;
  const ModelConfig m = hf_tiny();
  const std::vector<float> params = random_params(m, 5);
  export_hf_gpt2(dir.file("hf"), m, params);
  EXPECT_EQ(load_hf_gpt2(dir.file("hf"), m), params);
  EXPECT_EQ(load_hf_gpt2(dir.file("hf/model.safetensors"), m), params);

  const nlohmann::json config = nlohmann::json::parse(std::ifstream(dir.file("hf/config.json")));
  EXPECT_EQ(config["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ(config["n_layer"], 2);
  EXPECT_EQ(config["n_positions"], 8);
  EXPECT_EQ(config["vocab_size"], 61);
  const SafetensorsReader reader(dir.file("hf/model.safetensors"));
  EXPECT_EQ(reader.header().metadata.at("format"), "pt");
  ASSERT_NE(reader.header().find("transformer.h.1.attn.c_attn.weight"), nullptr);
  EXPECT_EQ(reader.header().find("transformer.h.1.attn.c_attn.weight")->shape, (std::vector<int64_t>{16, 48}));
  EXPECT_EQ(reader.header().find("transformer.wte.weight")->shape, (std::vector<int64_t>{61, 16}));
  EXPECT_EQ(reader.header().data_start % 8, 0u);
}

TEST(HfGpt2, NarrowExportsRoundEachWeightToNearestEven) {
  TempDir dir;
  const ModelConfig m = hf_tiny();
  const std::vector<float> params = random_params(m, 6);
  for (const std::string dtype : {"BF16", "F16"}) {
    export_hf_gpt2(dir.file(dtype), m, params, {dtype, 50256});
    const std::vector<float> back = load_hf_gpt2(dir.file(dtype), m);
    ASSERT_EQ(back.size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const float expected = dtype == "BF16" ? bf16_to_f32(f32_to_bf16(params[i])) : f16_to_f32(f32_to_f16(params[i]));
      ASSERT_EQ(back[i], expected) << dtype << " parameter " << i;
    }
  }
}

TEST(HfGpt2, LlmcFileAndSafetensorsGiveTheSameLoss) {
  TempDir dir;
  const ModelConfig m = hf_tiny();
  const std::vector<float> params = random_params(m, 7);
  LlmcModelHeader header{m.context_length, m.vocab_size, m.n_layer, m.n_head, m.n_embd, m.padded_vocab_size()};
  write_llmc_model(dir.file("model.bin"), header, params);
  export_hf_gpt2(dir.file("hf"), m, params);
  std::vector<float> from_llmc = read_llmc_parameters(dir.file("model.bin"), header);
  std::vector<float> from_hf = load_hf_gpt2(dir.file("hf"), m);
  const std::vector<int32_t> tokens{3, 14, 15, 9, 26, 5, 35, 60, 8, 9, 7, 9, 3, 2, 3, 8};
  const std::vector<int32_t> targets{14, 15, 9, 26, 5, 35, 60, 8, 9, 7, 9, 3, 2, 3, 8, 4};
  double losses[2];
  int k = 0;
  for (const std::vector<float>* p : {&from_llmc, &from_hf}) {
    GPT model(m, 2, 8, cpu_backend());
    model.parameters_from_host(*p);
    StepContext ctx;
    ctx.training = false;
    model.forward(tokens, targets, 2, 8, ctx);
    losses[k++] = model.loss_sum();
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_GT(losses[0], 0.0);
}

// The Python reference (tests/io/hf/gpt2_reference.py, standard library only) writes checkpoints as
// transformers lays them out and computes logits as transformers' GPT-2 does.
std::string python() {
  for (const char* candidate : {"python3", "/usr/bin/python3"})
    if (std::system((std::string("command -v ") + candidate + " > /dev/null 2>&1").c_str()) == 0) return candidate;
  return "";
}

std::string reference_script() { return std::string(GPT_SOURCE_DIR) + "/tests/io/hf/gpt2_reference.py"; }

std::vector<std::vector<float>> reference_logits(const std::string& py, const std::string& dir,
                                                 const std::vector<int32_t>& tokens) {
  std::string command = py + " " + reference_script() + " logits " + dir;
  for (const int t : tokens) command += " " + std::to_string(t);
  command += " > " + dir + "/logits.json";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return nlohmann::json::parse(std::ifstream(dir + "/logits.json")).get<std::vector<std::vector<float>>>();
}

// |ours - reference| <= 1e-4 (1 + |reference|): ours computes in FP32 (FP32 BLAS, our tanh and exp), the
// reference in double from the same stored weights; the logits are O(1) to O(10).
void expect_close(const std::vector<std::vector<float>>& ours, const std::vector<std::vector<float>>& ref) {
  ASSERT_EQ(ours.size(), ref.size());
  double worst = 0.0;
  for (size_t t = 0; t < ours.size(); ++t) {
    ASSERT_EQ(ours[t].size(), ref[t].size());
    for (size_t v = 0; v < ours[t].size(); ++v) {
      const double err = std::abs(ours[t][v] - ref[t][v]);
      worst = std::max(worst, err);
      ASSERT_LE(err, 1e-4 * (1.0 + std::abs(ref[t][v]))) << "position " << t << " token " << v;
    }
  }
  EXPECT_GT(worst, 0.0);  // two different computations; equal bits would mean one was not run
}

TEST(HfGpt2, CheckpointsFromAnIndependentWriterLoadAndGiveItsLogits) {
  const std::string py = python();
  if (py.empty()) GTEST_SKIP() << "python3 is not installed: the independent reference cannot run";
  TempDir dir;
  const std::vector<int32_t> tokens{0, 17, 60, 3, 3, 42, 8, 1};
  for (const std::string dtype : {"F32", "F16", "BF16"}) {
    const std::string out = dir.file(dtype);
    ASSERT_EQ(std::system((py + " " + reference_script() + " write " + out + " " + dtype + " 3").c_str()), 0);
    const ModelConfig m = hf_tiny();
    const std::vector<float> params = load_hf_gpt2(out, m);
    expect_close(our_logits(m, params, tokens), reference_logits(py, out, tokens));
  }
}

TEST(HfGpt2, ExportsGiveTheReferenceOurLogits) {
  const std::string py = python();
  if (py.empty()) GTEST_SKIP() << "python3 is not installed: the independent reference cannot run";
  TempDir dir;
  const ModelConfig m = hf_tiny();
  GPT model(m, 1, 8, cpu_backend());
  model.init_weights(9);
  std::vector<float> params = model.parameters_to_host();
  // GPT-2's initialisation leaves biases at 0 and gains at 1; random ones make the check cover them.
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  for (float& p : params) p += noise(rng);
  const ModelConfig& mc = m;
  const size_t Vp = static_cast<size_t>(mc.padded_vocab_size()), V = static_cast<size_t>(mc.vocab_size);
  std::fill(params.begin() + static_cast<std::ptrdiff_t>(V * 16), params.begin() + static_cast<std::ptrdiff_t>(Vp * 16), 0.0f);
  export_hf_gpt2(dir.file("hf"), m, params);
  const std::vector<int32_t> tokens{5, 4, 3, 2, 1, 0, 60, 59};
  expect_close(our_logits(m, params, tokens), reference_logits(py, dir.file("hf"), tokens));
}

// Hostile and wrong files: each refused with the file, the tensor and the bytes at fault.
std::string header_file(const std::string& json, size_t data_bytes) {
  std::string s(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(s.data(), &n, 8);
  return s + json + std::string(data_bytes, '\0');
}

std::string parse_error(const std::string& bytes) {
  return error_message([&] { parse_safetensors_header(bytes, bytes.size(), "f.safetensors"); });
}

TEST(Safetensors, RefusesMalformedHeaders) {
  EXPECT_THAT(parse_error("abc"), HasSubstr("too short"));
  std::string huge(8, '\xff');
  EXPECT_THAT(parse_error(huge), HasSubstr("exceeds the limit"));
  EXPECT_THAT(parse_error(header_file("{}", 0).substr(0, 9)), HasSubstr("runs past the end"));
  EXPECT_THAT(parse_error(header_file("[1]", 0)), HasSubstr("does not start with '{'"));
  EXPECT_THAT(parse_error(header_file("{\"a\":", 0)), HasSubstr("not valid JSON near file byte offset"));
  EXPECT_THAT(parse_error(header_file(R"({"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", 4)),
              HasSubstr("tensor 'w': unknown dtype 'Q7'"));
  EXPECT_THAT(parse_error(header_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)),
              HasSubstr("tensor 'w': shape [-1]"));
  EXPECT_THAT(parse_error(header_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", 8)),
              HasSubstr("tensor 'w': data_offsets [0, 12] are not inside the data section of 8 bytes"));
  EXPECT_THAT(parse_error(header_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
              HasSubstr("tensor 'w': shape [3] of F32 needs 12 bytes, but data_offsets [0, 8] hold 8"));
  EXPECT_THAT(parse_error(header_file(
                  R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8)),
              HasSubstr("more than 2^64"));
  EXPECT_THAT(parse_error(header_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)),
              HasSubstr("tensor 'b' (data bytes 4 to 8) overlaps tensor 'a'"));
  EXPECT_THAT(parse_error(header_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)),
              HasSubstr("data bytes 0 to 4 (file bytes"));
  EXPECT_THAT(parse_error(header_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8)),
              HasSubstr("data bytes 4 to 8"));
  EXPECT_THAT(parse_error(header_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4)),
              HasSubstr("unknown field 'x'"));
  const std::string padded =
      header_file(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,1],"data_offsets":[0,4]}}   )", 4);
  const SafetensorsHeader ok = parse_safetensors_header(padded, padded.size(), "f");
  ASSERT_EQ(ok.tensors.size(), 1u);
  EXPECT_EQ(ok.tensors[0].shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(ok.metadata.at("format"), "pt");
}

TEST(Safetensors, ReadsTheSameFromMemoryAsFromTheFile) {
  TempDir dir;
  const std::vector<float> a = {1.5f, -2.25f, 3.0f, 0.1f, 7.0f, -0.0f};
  const std::vector<float> b = {0.5f, 4.0f};
  const std::vector<SafetensorsOutput> tensors = {{"a", {2, 3}, a}, {"b", {2}, b}};
  for (const std::string dtype : {"F32", "BF16", "F16"}) {
    SCOPED_TRACE(dtype);
    const std::string path = dir.file("w.safetensors");
    write_safetensors(path, tensors, {{"format", "pt"}}, dtype);
    const std::string bytes = read_file_bytes(path);
    const SafetensorsReader from_file(path);
    const SafetensorsReader from_memory(BinaryFile::in_memory(bytes, "w.safetensors", "safetensors file"));
    EXPECT_EQ(from_file.path(), path);
    EXPECT_EQ(from_memory.path(), "w.safetensors");
    ASSERT_EQ(from_memory.header().tensors.size(), 2u);
    EXPECT_EQ(from_memory.header().data_start, from_file.header().data_start);
    EXPECT_EQ(from_memory.header().metadata, from_file.header().metadata);
    for (size_t t = 0; t < 2; ++t) {
      const SafetensorsEntry& e = from_file.header().tensors[t];
      EXPECT_EQ(from_memory.header().tensors[t].name, e.name);
      EXPECT_EQ(from_memory.header().tensors[t].shape, e.shape);
      std::vector<float> disk(e.numel()), memory(e.numel());
      from_file.read_f32(e, disk);
      from_memory.read_f32(from_memory.header().tensors[t], memory);
      EXPECT_EQ(disk, memory);
      if (dtype == "F32") EXPECT_EQ(disk, t == 0 ? a : b);
    }
  }
  // A file cut short after its header was checked: the read names the tensor and its bytes.
  const std::string path = dir.file("w.safetensors");
  write_safetensors(path, tensors, {}, "F32");
  const SafetensorsReader reader(path);
  fs::resize_file(path, fs::file_size(path) - 4);
  const SafetensorsEntry& last = reader.header().tensors.back();
  std::vector<float> out(last.numel());
  EXPECT_THAT(error_message([&] { reader.read_f32(last, out); }), HasSubstr("tensor 'b' (file bytes"));
}

TEST(HfGpt2, RefusesCheckpointsThatAreNotThisModel) {
  TempDir dir;
  const ModelConfig m = hf_tiny();
  export_hf_gpt2(dir.file("hf"), m, random_params(m, 8));
  ModelConfig wider = m;
  wider.n_embd = 32;
  EXPECT_THAT(error_message([&] { load_hf_gpt2(dir.file("hf"), wider); }),
              HasSubstr("n_embd is 16 but model.n_embd is 32"));
  fs::remove(dir.file("hf/config.json"));
  EXPECT_THAT(error_message([&] { load_hf_gpt2(dir.file("hf"), wider); }),
              HasSubstr("tensor 'transformer.wte.weight' has shape [61, 16], but this model (model.*) needs [61, 32]"));
  ModelConfig deeper = m;
  deeper.n_layer = 3;
  EXPECT_THAT(error_message([&] { load_hf_gpt2(dir.file("hf"), deeper); }),
              HasSubstr("tensor 'transformer.h.2.ln_1.weight' is missing"));
  ModelConfig shallower = m;
  shallower.n_layer = 1;
  EXPECT_THAT(error_message([&] { load_hf_gpt2(dir.file("hf"), shallower); }),
              HasSubstr("12 tensor(s) that are not part of a 1-layer GPT-2"));
  std::ofstream(dir.file("hf/config.json")) << R"({"n_layer": 2, "activation_function": "relu", "layer_norm_epsilon": 1e-6})";
  EXPECT_THAT(error_message([&] { load_hf_gpt2(dir.file("hf"), m); }),
              AllOf(HasSubstr("activation_function is \"relu\""), HasSubstr("layer_norm_epsilon is 1e-06")));
  EXPECT_THAT(error_message([&] { load_hf_gpt2(dir.file("nothing"), m); }), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace gpt::test

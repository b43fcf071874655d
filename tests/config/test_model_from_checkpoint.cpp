// model.init_from filling the model section at config load: from a Hugging Face directory (config.json), a
// bare .safetensors file (tensor shapes) and an llm.c model file (its header); written keys must agree.
#include "config/config_loader.h"
#include "core/error.h"
#include "io/hf_gpt2.h"
#include "io/llmc_model_file.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace gpt::test {
namespace {

namespace fs = std::filesystem;

// Random non-zero weights: the loader reads only headers, so any values do, but none are left at zero.
std::vector<float> random_weights(const ModelConfig& m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.01f, 1.0f);
  std::vector<float> w(llmc_header_of(m).num_parameters());
  for (float& x : w) x = (rng() & 1) ? u(rng) : -u(rng);
  return w;
}

// Vocabulary 61, 3 layers, 16 channels, 4 heads, 160 positions (at least train.seq_len's default 128): every
// shape key differs from the defaults.
ModelConfig checkpoint_model() {
  ModelConfig m = tiny_model(61, 3, 16, 4, 160);
  m.vocab_pad_multiple = 64;
  return m;
}

std::string with_init_from(const std::string& path, const std::string& model_keys = "") {
  return "model:\n" + model_keys + "  init_from: \"" + path + "\"\n";
}

std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    load_config_from_string(yaml, overrides, "config.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(message, ...)                                                     \
  do {                                                                                     \
    std::string msg_ = (message);                                                          \
    for (const std::string& part_ : std::initializer_list<std::string>{__VA_ARGS__}) EXPECT_NE(msg_.find(part_), std::string::npos) \
        << "missing '" << part_ << "' in: " << msg_;                                       \
  } while (0)

void expect_shape(const ModelConfig& got, const ModelConfig& want) {
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.context_length, want.context_length);
  EXPECT_EQ(got.n_layer, want.n_layer);
  EXPECT_EQ(got.n_head, want.n_head);
  EXPECT_EQ(got.n_embd, want.n_embd);
  EXPECT_EQ(got.padded_vocab_size(), want.padded_vocab_size());
}

TEST(ModelFromCheckpoint, HuggingFaceDirectoryGivesEveryShapeKey) {
  TempDir dir;
  const ModelConfig m = checkpoint_model();
  export_hf_gpt2(dir.file("hf"), m, random_weights(m, 1));
  const Config c = load_config_from_string(with_init_from(dir.file("hf")));
  expect_shape(c.model, m);
  EXPECT_EQ(c.model.vocab_pad_multiple, ModelConfig{}.vocab_pad_multiple);
  EXPECT_DOUBLE_EQ(c.model.dropout, ModelConfig{}.dropout);
  // The resolved config writes every key; it loads back to itself, each key now agreeing with the checkpoint.
  EXPECT_EQ(config_to_yaml(load_config_from_string(config_to_yaml(c))), config_to_yaml(c));
  // The same through --set, as `gpt-train train CONFIG --set model.init_from=PATH` gives it.
  expect_shape(load_config_from_string("train:\n  steps: 1\n", {"model.init_from=" + dir.file("hf")}).model, m);
}

TEST(ModelFromCheckpoint, BareSafetensorsGivesTheTensorShapesAndNeedsTheHeads) {
  TempDir dir;
  const ModelConfig m = checkpoint_model();
  export_hf_gpt2(dir.file("hf"), m, random_weights(m, 2));
  fs::create_directories(dir.file("bare"));
  fs::copy_file(dir.file("hf/model.safetensors"), dir.file("bare/gpt.safetensors"));
  const std::string bare = dir.file("bare/gpt.safetensors");
  expect_shape(load_config_from_string(with_init_from(bare, "  n_head: 4\n")).model, m);
  EXPECT_ERROR_HAS(load_error(with_init_from(bare)), "config.yaml:2", "model.n_head is not written", "no config.json",
                   bare, "write model.n_head");
}

TEST(ModelFromCheckpoint, ConfigJsonWithoutHeadsNeedsTheHeads) {
  TempDir dir;
  const ModelConfig m = checkpoint_model();
  export_hf_gpt2(dir.file("hf"), m, random_weights(m, 3));
  write_bytes(dir.file("hf/config.json"), "{\"n_layer\": 3}", 14);
  EXPECT_ERROR_HAS(load_error(with_init_from(dir.file("hf"))), "model.n_head is not written",
                   dir.file("hf/config.json") + " has no n_head");
  expect_shape(load_config_from_string(with_init_from(dir.file("hf"), "  n_head: 4\n")).model, m);
}

TEST(ModelFromCheckpoint, LlmcFileGivesEveryShapeKeyAndItsPadding) {
  TempDir dir;
  ModelConfig m = checkpoint_model();
  // 61 padded to 72: the default multiple 64 would give 64, so the smallest that gives 72 (12) is taken.
  m.vocab_pad_multiple = 24;
  write_llmc_model(dir.file("model.bin"), llmc_header_of(m), random_weights(m, 4));
  const Config c = load_config_from_string(with_init_from(dir.file("model.bin")));
  expect_shape(c.model, m);
  EXPECT_EQ(c.model.padded_vocab_size(), 72);
  EXPECT_EQ(c.model.vocab_pad_multiple, 12);
  EXPECT_EQ(llmc_header_of(c.model), read_llmc_header(dir.file("model.bin")));
  // A written multiple that gives the same padding is kept; one that does not is an error.
  EXPECT_EQ(load_config_from_string(with_init_from(dir.file("model.bin"), "  vocab_pad_multiple: 36\n"))
                .model.vocab_pad_multiple, 36);
  EXPECT_ERROR_HAS(load_error(with_init_from(dir.file("model.bin"), "  vocab_pad_multiple: 64\n")), "config.yaml:2",
                   "model.vocab_pad_multiple is 64", "pads model.vocab_size 61 to 64", "padded_vocab_size 72",
                   dir.file("model.bin") + " header");
}

TEST(ModelFromCheckpoint, WrittenKeyThatDisagreesNamesKeyLineBothValuesAndFile) {
  TempDir dir;
  const ModelConfig m = checkpoint_model();
  export_hf_gpt2(dir.file("hf"), m, random_weights(m, 5));
  write_llmc_model(dir.file("model.bin"), llmc_header_of(m), random_weights(m, 6));
  EXPECT_ERROR_HAS(load_error(with_init_from(dir.file("hf"), "  n_embd: 16\n  n_layer: 5\n")), "config.yaml:3:",
                   "model.n_layer is 5", "checkpoint has 3", dir.file("hf/config.json") + ": n_layer",
                   "remove model.n_layer");
  EXPECT_ERROR_HAS(load_error(with_init_from(dir.file("model.bin"), "  context_length: 1024\n")), "config.yaml:2:",
                   "model.context_length is 1024", "checkpoint has 160", dir.file("model.bin") + " header: max_seq_len");
  EXPECT_ERROR_HAS(load_error(with_init_from(dir.file("hf")), {"model.n_head=8"}), "--set: model.n_head is 8",
                   "checkpoint has 4");
}

TEST(ModelFromCheckpoint, WrittenKeysThatAgreeLoad) {
  TempDir dir;
  const ModelConfig m = checkpoint_model();
  export_hf_gpt2(dir.file("hf"), m, random_weights(m, 7));
  const Config c = load_config_from_string(with_init_from(dir.file("hf"), "  n_layer: 3\n  vocab_size: 61\n  dropout: 0.1\n"));
  expect_shape(c.model, m);
  EXPECT_DOUBLE_EQ(c.model.dropout, 0.1);
}

TEST(ModelFromCheckpoint, ValuesTakenFromTheCheckpointAreValidatedNamingIt) {
  TempDir dir;
  const ModelConfig m = checkpoint_model();
  export_hf_gpt2(dir.file("hf"), m, random_weights(m, 8));
  write_bytes(dir.file("hf/config.json"), "{\"n_head\": 5}", 13);
  EXPECT_ERROR_HAS(load_error(with_init_from(dir.file("hf"))), dir.file("hf/config.json") + ": n_head: model.n_head: 5 heads");
}

TEST(ModelFromCheckpoint, MissingCheckpointIsAnErrorUnlessEveryShapeKeyIsWritten) {
  TempDir dir;
  const std::string missing = dir.file("gone/model.bin");
  EXPECT_ERROR_HAS(load_error(with_init_from(missing, "  n_layer: 3\n")), "config.yaml:3: model.init_from", missing,
                   "does not exist", "model.vocab_size, model.context_length, model.n_head, model.n_embd");
  // A run's saved config.yaml writes every key; it still loads after its base has moved.
  const Config c = load_config_from_string(
      with_init_from(missing, "  vocab_size: 61\n  context_length: 160\n  n_layer: 3\n  n_head: 4\n  n_embd: 16\n"));
  expect_shape(c.model, checkpoint_model());
}

TEST(ModelFromCheckpoint, NoInitFromKeepsTheDefaults) {
  const Config c = load_config_from_string("train:\n  steps: 3\n");
  Config defaults;
  defaults.train.steps = 3;
  EXPECT_EQ(config_to_yaml(c), config_to_yaml(defaults));
  expect_shape(load_config_from_string("model:\n  init_from: \"\"\n  n_layer: 7\n").model,
               [] { ModelConfig m; m.n_layer = 7; return m; }());
}

}  // namespace
}  // namespace gpt::test

// The config loader: defaults, every key type, precise errors (key, line, hint), --set overrides,
// the resolved-YAML round trip and the README's key reference.
#include "config/config_loader.h"
#include "core/error.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpt {
namespace {

// The message of the gpt::Error that loading throws, or "" when it loads.
std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    load_config_from_string(yaml, overrides, "config.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(message, ...)                                                  \
  do {                                                                                  \
    std::string msg_ = (message);                                                       \
    for (const char* part_ : {__VA_ARGS__}) EXPECT_NE(msg_.find(part_), std::string::npos) \
        << "missing '" << part_ << "' in: " << msg_;                                    \
  } while (0)

// Every "section.key" name, taken from the visit lists.
struct KeyNames {
  template <class S>
  void section(std::string_view name, S& s) {
    prefix = std::string(name);
    s.visit(*this);
  }
  template <class T>
  void field(std::string_view key, T&, std::string_view) { names.push_back(prefix + "." + std::string(key)); }
  void choice(std::string_view key, std::string& m, const std::vector<std::string>&, std::string_view d) { field(key, m, d); }
  void subset(std::string_view key, std::vector<std::string>& m, const std::vector<std::string>&, std::string_view d) {
    field(key, m, d);
  }
  std::string prefix;
  std::vector<std::string> names;
};

std::vector<std::string> all_key_names() {
  Config c;
  KeyNames k;
  c.visit(k);
  return k.names;
}

TEST(ConfigLoad, EmptyDocumentGivesDefaults) {
  Config defaults;
  EXPECT_EQ(config_to_yaml(load_config_from_string("")), config_to_yaml(defaults));
  EXPECT_EQ(config_to_yaml(load_config_from_string("# only a comment\n")), config_to_yaml(defaults));
  EXPECT_EQ(config_to_yaml(load_config_from_string("model:\n")), config_to_yaml(defaults));
}

TEST(ConfigLoad, EveryKeyTypeParses) {
  const char* yaml = R"(
model:
  vocab_size: 50257
  n_head: 6
  n_embd: 384
  context_length: 512
  n_layer: 6
  dropout: 0.1
  init_std: 2e-2
  init_from: "gpt2_124M.bin"
data:
  train: data/tiny/train_*.bin
  val: ""
train:
  backend: auto
  seed: 18446744073709551615
  seq_len: 512
  sample_temperature: 0.8
  sample_prompt: 'Once upon: a time'
  resume: true
optim:
  lr: 6e-4
  schedule: linear
  no_decay: [bias, embedding]
log:
  level: debug
)";
  Config c = load_config_from_string(yaml);
  EXPECT_EQ(c.model.vocab_size, 50257);
  EXPECT_EQ(c.model.n_head, 6);
  EXPECT_EQ(c.model.n_embd, 384);
  EXPECT_EQ(c.model.n_layer, 6);
  EXPECT_DOUBLE_EQ(c.model.dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.model.init_std, 0.02);
  EXPECT_EQ(c.model.init_from, "gpt2_124M.bin");
  EXPECT_EQ(c.data.train, "data/tiny/train_*.bin");
  EXPECT_EQ(c.data.val, "");
  EXPECT_EQ(c.train.backend, "auto");
  EXPECT_EQ(c.train.seed, 18446744073709551615ull);
  EXPECT_EQ(c.train.sample_prompt, "Once upon: a time");
  EXPECT_TRUE(c.train.resume);
  EXPECT_DOUBLE_EQ(c.optim.lr, 6e-4);
  EXPECT_EQ(c.optim.schedule, "linear");
  EXPECT_EQ(c.optim.no_decay, (std::vector<std::string>{"bias", "embedding"}));
  EXPECT_EQ(c.log.level, "debug");
  // Untouched keys keep their defaults.
  EXPECT_EQ(c.model.vocab_pad_multiple, ModelConfig{}.vocab_pad_multiple);
  EXPECT_EQ(c.train.steps, TrainConfig{}.steps);
}

TEST(ConfigLoad, EmptyListAndNullString) {
  Config c = load_config_from_string("optim:\n  no_decay: []\nmodel:\n  init_from:\n");
  EXPECT_TRUE(c.optim.no_decay.empty());
  EXPECT_EQ(c.model.init_from, "");
}

TEST(ConfigLoad, MissingFileNamesThePath) {
  std::string path = "/nonexistent/dir/gpt_config_missing.yaml";
  try {
    load_config(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_ERROR_HAS(e.what(), path.c_str(), "cannot open");
  }
}

TEST(ConfigLoad, ReadsAFile) {
  auto path = std::filesystem::temp_directory_path() / "gpt_test_config_read.yaml";
  {
    std::ofstream out(path);
    out << "model:\n  n_layer: 7\n";
  }
  EXPECT_EQ(load_config(path.string()).model.n_layer, 7);
  try {
    std::ofstream out(path);
    out << "model:\n  n_layer: seven\n";
    out.close();
    load_config(path.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string where = path.string() + ":2: model.n_layer";
    EXPECT_ERROR_HAS(e.what(), where.c_str());
  }
  std::filesystem::remove(path);
}

TEST(ConfigErrors, SyntaxErrorNamesSourceAndLine) {
  EXPECT_ERROR_HAS(load_error("model:\n  n_layer: [1, 2\n"), "config.yaml:", "YAML syntax error");
  EXPECT_ERROR_HAS(load_error("model:\n  n_layer: 4\n n_head: 2\n"), "config.yaml:3", "YAML syntax error");
}

TEST(ConfigErrors, UnknownKeyNamesKeyLineAndSuggestion) {
  std::string msg = load_error("model:\n  n_head: 4\n  n_layers: 6\n");
  EXPECT_ERROR_HAS(msg, "config.yaml:3", "unknown key 'model.n_layers'", "did you mean 'model.n_layer'?");
  // A key put in the wrong section points at the right one.
  EXPECT_ERROR_HAS(load_error("model:\n  steps: 6\n"), "config.yaml:2", "unknown key 'model.steps'",
                   "did you mean 'train.steps'?");
  // Nothing close: no hint, but still the key and line.
  msg = load_error("train:\n\n  completely_different: 1\n");
  EXPECT_ERROR_HAS(msg, "config.yaml:3", "unknown key 'train.completely_different'");
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
}

// A group of keys (precision.fp8.*) may be written nested or dotted; --set uses the dotted name.
TEST(ConfigLoad, NestedGroupReadsAsDottedKeys) {
  const Config nested = load_config_from_string(
      "precision:\n  recipe: fp8\n  fp8:\n    backward: e5m2\n    amax_history: 16\n    bf16_layers: 1\n");
  EXPECT_EQ(nested.precision.recipe, "fp8");
  EXPECT_EQ(nested.precision.fp8_backward, "e5m2");
  EXPECT_EQ(nested.precision.fp8_amax_history, 16);
  EXPECT_EQ(nested.precision.fp8_bf16_layers, 1);
  const Config dotted = load_config_from_string("precision:\n  fp8.scaling: current\n", {"precision.fp8.margin=2"});
  EXPECT_EQ(dotted.precision.fp8_scaling, "current");
  EXPECT_EQ(dotted.precision.fp8_margin, 2);
  EXPECT_ERROR_HAS(load_error("precision:\n  fp8:\n    backwards: e5m2\n"), "config.yaml:3",
                   "unknown key 'precision.fp8.backwards'", "did you mean 'precision.fp8.backward'?");
  EXPECT_ERROR_HAS(load_error("precision:\n  fp8:\n    backward: e4m3\n"), "config.yaml:3", "precision.fp8.backward");
  EXPECT_ERROR_HAS(load_error("precision:\n  fp8:\n    backward: e5m2\n  fp8.backward: bf16\n"), "config.yaml:4",
                   "'precision.fp8.backward' appears twice");
}

TEST(ConfigErrors, UnknownSection) {
  EXPECT_ERROR_HAS(load_error("modle:\n  n_layer: 6\n"), "config.yaml:1", "unknown section 'modle'",
                   "did you mean 'model'?");
  EXPECT_ERROR_HAS(load_error("model:\n  n_layer: 6\nfoo: 1\n"), "config.yaml:3", "unknown section 'foo'", "model, data");
}

TEST(ConfigErrors, StructureMustBeMappings) {
  EXPECT_ERROR_HAS(load_error("- model\n- data\n"), "config.yaml:1", "top level", "mapping");
  EXPECT_ERROR_HAS(load_error("model: 5\n"), "config.yaml:1", "section 'model'", "mapping");
  EXPECT_ERROR_HAS(load_error("model:\n  n_layer: 2\nmodel:\n  n_head: 2\n"), "config.yaml:3", "appears twice");
  EXPECT_ERROR_HAS(load_error("model:\n  n_layer: 2\n  n_layer: 3\n"), "config.yaml:3", "model.n_layer", "appears twice");
}

TEST(ConfigErrors, WrongTypesNameKeyAndLine) {
  EXPECT_ERROR_HAS(load_error("model:\n  n_layer: 2\n\n\n\n\n  n_head: four\n"),
                   "config.yaml:7: model.n_head: expected an integer, got 'four'");
  EXPECT_ERROR_HAS(load_error("train:\n  steps: 2.5\n"), "config.yaml:2: train.steps: expected an integer, got '2.5'");
  EXPECT_ERROR_HAS(load_error("train:\n  seed: -1\n"), "config.yaml:2: train.seed: expected a non-negative integer, got '-1'");
  EXPECT_ERROR_HAS(load_error("train:\n  resume: yes\n"), "config.yaml:2: train.resume: expected true or false, got 'yes'");
  EXPECT_ERROR_HAS(load_error("optim:\n  lr: fast\n"), "config.yaml:2: optim.lr: expected a number, got 'fast'");
  EXPECT_ERROR_HAS(load_error("optim:\n  lr: [1]\n"), "config.yaml:2: optim.lr: expected a number, got a list");
  EXPECT_ERROR_HAS(load_error("optim:\n  no_decay: bias\n"), "config.yaml:2: optim.no_decay: expected a list");
  EXPECT_ERROR_HAS(load_error("data:\n  train: {a: 1}\n"), "config.yaml:2: data.train: expected a string, got a mapping");
  EXPECT_ERROR_HAS(load_error("model:\n  n_layer:\n"), "config.yaml:2: model.n_layer: expected an integer, got nothing");
  EXPECT_ERROR_HAS(load_error("model:\n  n_layer: 99999999999\n"), "config.yaml:2: model.n_layer: 99999999999 is out of range");
}

// Issue 20: n_embd 2147483647 (a prime) stalled validation for 27 s in the n_head hint. Such sizes are now
// refused first, and the hint finds divisors in √n steps.
TEST(ConfigErrors, AbsurdModelSizesAreRefusedBeforeAnythingUsesThem) {
  EXPECT_ERROR_HAS(load_error("model:\n  n_embd: 2147483647\n  n_head: 12\n"),
                   "config.yaml:2: model.n_embd: 2147483647 is too large; it must be at most 65536");
  EXPECT_ERROR_HAS(load_error("model:\n  n_layer: 100000\n"), "model.n_layer: 100000 is too large; it must be at most 4096");
  EXPECT_ERROR_HAS(load_error("model:\n  vocab_size: 2147483647\n"), "model.vocab_size: 2147483647 is too large");
  EXPECT_ERROR_HAS(load_error("model:\n  vocab_pad_multiple: 2147483647\n"), "model.vocab_pad_multiple: 2147483647 is too large");
  EXPECT_ERROR_HAS(load_error("model:\n  context_length: 2147483647\n"), "model.context_length: 2147483647 is too large");
  EXPECT_ERROR_HAS(load_error("model:\n  n_embd: 65536\n  n_head: 3\n"), "3 heads do not divide", "e.g. 2 or 4");
}

TEST(ConfigErrors, BadValuesNameKeyAndLine) {
  EXPECT_ERROR_HAS(load_error("model:\n  n_embd: 128\n\n\n  n_head: 5\n"), "config.yaml:5: model.n_head:",
                   "5 heads do not divide model.n_embd = 128 (config.yaml:2)", "4 or 8");
  EXPECT_ERROR_HAS(load_error("model:\n  n_embd: 768\n  n_head: 7\n"), "e.g. 6 or 8");
  EXPECT_ERROR_HAS(load_error("model:\n  n_embd: 768\n  n_head: 1000\n"), "e.g. 768");
  EXPECT_ERROR_HAS(load_error("model:\n  n_embd: 65521\n  n_head: 12\n"), "e.g. 1 or 65521");  // a prime
  EXPECT_ERROR_HAS(load_error("model:\n  context_length: 256\ntrain:\n  seq_len: 512\n"),
                   "config.yaml:4: train.seq_len: 512 exceeds model.context_length = 256 (config.yaml:2)");
  EXPECT_ERROR_HAS(load_error("model:\n  dropout: 1.0\n"), "config.yaml:2: model.dropout: 1 is outside [0, 1)");
  EXPECT_ERROR_HAS(load_error("optim:\n  schedule: cosin\n"), "config.yaml:2: optim.schedule: 'cosin' is not allowed",
                   "did you mean 'cosine'?", "one of: cosine, linear, constant");
  EXPECT_ERROR_HAS(load_error("optim:\n  no_decay: [biases]\n"), "config.yaml:2: optim.no_decay: 'biases' is not allowed",
                   "did you mean 'bias'?", "bias, layernorm, embedding");
  EXPECT_ERROR_HAS(load_error("optim:\n  no_decay: [bias, bias]\n"), "optim.no_decay: 'bias' is listed twice");
  EXPECT_ERROR_HAS(load_error("train:\n  backend: gpu\n"), "config.yaml:2: train.backend: 'gpu' is not allowed", "cpu, cuda, auto");
  EXPECT_ERROR_HAS(load_error("model:\n  n_layer: 0\n"), "config.yaml:2: model.n_layer: 0 is too small; it must be at least 1");
  EXPECT_ERROR_HAS(load_error("optim:\n  lr: 0\n"), "config.yaml:2: optim.lr: 0 is not positive");
  EXPECT_ERROR_HAS(load_error("optim:\n  beta2: 1\n"), "config.yaml:2: optim.beta2: 1 is outside [0, 1)");
  EXPECT_ERROR_HAS(load_error("optim:\n  min_lr_ratio: 1.5\n"), "config.yaml:2: optim.min_lr_ratio: 1.5 is outside [0, 1]");
  EXPECT_ERROR_HAS(load_error("data:\n  train: ''\n"), "config.yaml:2: data.train: is empty");
  EXPECT_ERROR_HAS(load_error("log:\n  every: 0\n"), "config.yaml:2: log.every:");
  EXPECT_ERROR_HAS(load_error("checkpoint:\n  keep_last: -1\n"), "config.yaml:2: checkpoint.keep_last:");
  // A value left at its default is reported as such.
  EXPECT_ERROR_HAS(load_error("model:\n  n_embd: 130\n"), "default: model.n_head:", "model.n_embd = 130 (config.yaml:2)");
  // Zero steps is a valid evaluation-only run.
  EXPECT_EQ(load_error("train:\n  steps: 0\n"), "");
}

TEST(ConfigOverrides, SetWinsOverTheFile) {
  Config c = load_config_from_string("train:\n  steps: 10\n", {"train.steps=20", "optim.no_decay=[bias]",
                                                                 "data.train=*.bin", "train.sample_prompt=Once: upon",
                                                                 "model.init_from="});
  EXPECT_EQ(c.train.steps, 20);
  EXPECT_EQ(c.optim.no_decay, (std::vector<std::string>{"bias"}));
  EXPECT_EQ(c.data.train, "*.bin");
  EXPECT_EQ(c.train.sample_prompt, "Once: upon");
  EXPECT_EQ(c.model.init_from, "");
  // Later overrides win over earlier ones.
  EXPECT_EQ(load_config_from_string("", {"train.steps=5", "train.steps=6"}).train.steps, 6);
}

TEST(ConfigOverrides, ErrorsNameSet) {
  EXPECT_ERROR_HAS(load_error("", {"train.stepz=5"}), "--set: unknown key 'train.stepz'", "did you mean 'train.steps'?");
  EXPECT_ERROR_HAS(load_error("", {"train"}), "--set", "'train'", "no '='");
  EXPECT_ERROR_HAS(load_error("", {"train.steps"}), "--set", "no '='", "section.key=value");
  EXPECT_ERROR_HAS(load_error("", {"train.steps=many"}), "--set: train.steps: expected an integer, got 'many'");
  EXPECT_ERROR_HAS(load_error("", {"optim.no_decay=[bias"}), "--set: optim.no_decay:", "not valid YAML");
  EXPECT_ERROR_HAS(load_error("model:\n  n_embd: 128\n", {"model.n_head=5"}), "--set: model.n_head: 5 heads",
                   "(config.yaml:2)");
}

TEST(ConfigYaml, RoundTripsANonDefaultConfig) {
  Config c;
  c.model.vocab_size = 50257;
  c.model.n_head = 12;
  c.model.n_embd = 768;
  c.model.context_length = 1024;
  c.model.dropout = 0.1;
  c.model.init_std = 0.1 + 0.2;  // not a short decimal: needs all 17 digits
  c.model.init_from = "weights/my model.bin";
  c.data.train = "data/*/train_[0-9].bin";
  c.data.val = "";
  c.train.backend = "cuda";
  c.train.seed = 18446744073709551615ull;
  c.train.sample_prompt = "Say \"hi\"\n\tand: 'bye' # not a comment \\";
  c.train.sample_temperature = 1.0 / 3.0;
  c.train.resume = true;
  c.optim.lr = 6e-4;
  c.optim.eps = 1e-300;
  c.optim.schedule = "constant";
  c.optim.no_decay = {};
  c.log.run_dir = "null";
  c.log.level = "warn";
  c.checkpoint.every = 500;

  std::string yaml = config_to_yaml(c);
  EXPECT_EQ(yaml.rfind("# resolved gpt-train configuration\n", 0), 0u) << yaml;
  Config back = load_config_from_string(yaml, {}, "resolved.yaml");
  EXPECT_EQ(config_to_yaml(back), yaml);
  EXPECT_EQ(back.model.init_std, c.model.init_std);
  EXPECT_EQ(back.train.sample_prompt, c.train.sample_prompt);
  EXPECT_EQ(back.log.run_dir, "null");
  EXPECT_EQ(back.train.seed, c.train.seed);

  c.optim.no_decay = {"layernorm", "bias"};
  yaml = config_to_yaml(c);
  EXPECT_NE(yaml.find("no_decay: [layernorm, bias]"), std::string::npos) << yaml;
  EXPECT_EQ(config_to_yaml(load_config_from_string(yaml)), yaml);
}

TEST(ConfigYaml, DefaultsRoundTripAndListEveryKey) {
  std::string yaml = config_to_yaml(Config{});
  EXPECT_EQ(config_to_yaml(load_config_from_string(yaml)), yaml);
  for (const auto& name : all_key_names()) {
    std::string key = name.substr(name.find('.') + 1);
    EXPECT_NE(yaml.find("  " + key + ": "), std::string::npos) << name;
  }
}

TEST(ConfigReference, ContainsEveryKeyAndChoices) {
  std::string md = config_reference_markdown();
  for (const auto& name : all_key_names()) EXPECT_NE(md.find("`" + name + "`"), std::string::npos) << name;
  EXPECT_NE(md.find("| key | default | description |"), std::string::npos);
  EXPECT_NE(md.find("One of: cosine, linear, constant."), std::string::npos) << md;
  EXPECT_NE(md.find("| `model.n_layer` | `4` |"), std::string::npos) << md;
}

// The README embeds config_reference_markdown() between the markers; a key added to the code without
// regenerating the README fails here.
TEST(ConfigReference, ReadmeIsInStepWithTheCode) {
  std::filesystem::path readme = std::filesystem::path(GPT_SOURCE_DIR) / "README.md";
  std::ifstream in(readme);
  ASSERT_TRUE(in) << readme << " is missing; it must embed config_reference_markdown()";
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();

  const std::string begin = "<!-- config-reference:begin -->", end = "<!-- config-reference:end -->";
  size_t b = text.find(begin), e = text.find(end);
  ASSERT_NE(b, std::string::npos) << "README.md lacks " << begin;
  ASSERT_NE(e, std::string::npos) << "README.md lacks " << end;
  ASSERT_LT(b, e);
  std::string embedded = text.substr(b + begin.size(), e - b - begin.size());
  auto trim_newlines = [](std::string s) {
    size_t first = s.find_first_not_of('\n'), last = s.find_last_not_of('\n');
    return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
  };
  EXPECT_EQ(trim_newlines(embedded), trim_newlines(config_reference_markdown()))
      << "regenerate the README's config reference from config_reference_markdown()";
  for (const auto& name : all_key_names()) EXPECT_NE(embedded.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace gpt

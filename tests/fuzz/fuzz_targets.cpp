#include "fuzz_targets.h"

#include "config/config_loader.h"
#include "core/error.h"
#include "data/shard.h"
#include "data/gpt2_tokenizer.h"
#include "data/tokenizer.h"
#include "io/binary_file.h"
#include "io/checkpoint.h"
#include "io/crc32c.h"
#include "io/durable_file.h"
#include "io/llmc_model_file.h"
#include "io/optimizer_shards.h"
#include "io/safetensors.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <unistd.h>

namespace fs = std::filesystem;

namespace gpt::fuzz {
namespace {

// A per-process scratch directory (fuzzing jobs may run in parallel), removed when the process exits so
// that gpt_tests runs and fuzzing sessions do not leave one each behind in /tmp.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("gpt_fuzz_" + std::to_string(::getpid()));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

const fs::path& scratch() {
  static const ScratchDir dir;
  return dir.path;
}

// No fsync: scratch files only need to be readable by this process, and fsync would dominate each run.
// The old file is removed rather than truncated: ext4 writes a truncated file's new blocks back when it
// is closed (auto_da_alloc, its guard for programs that rewrite files without fsync), which was most of
// the checkpoint target's time.
void write_input(const fs::path& path, std::string_view bytes) {
  std::error_code ignored;
  fs::remove(path, ignored);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) std::abort();
}

// Any gpt::Error is a correct answer to bad input; anything else escaping is a bug libFuzzer reports.
template <class F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

}  // namespace

int config_loader(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string yaml(in.substr(0, nul));
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::string_view rest = in.substr(nul + 1);
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      overrides.emplace_back(rest.substr(0, nl));
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    }
  }
  expect_clean([&] {
    const Config c = load_config_from_string(yaml, overrides, "fuzz.yaml");
    // Whatever loads must dump to YAML that loads back to the same dump.
    const std::string dumped = config_to_yaml(c);
    if (config_to_yaml(load_config_from_string(dumped)) != dumped) std::abort();
  });
  return 0;
}

int token_shard(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const BinaryFile file = BinaryFile::in_memory(bytes, "shard.bin", "token shard");
  expect_clean([&] { read_shard_header(file); });
  expect_clean([&] { read_shard(file, 256); });
  expect_clean([&] {
    const std::vector<uint16_t> tokens = read_shard(file, 65536);
    // What reads must be the file's tokens, as they follow the header.
    if (tokens.size() * sizeof(uint16_t) != size - kShardHeaderBytes ||
        (!tokens.empty() && std::memcmp(tokens.data(), data + kShardHeaderBytes, size - kShardHeaderBytes) != 0))
      std::abort();
  });
  return 0;
}

namespace {

// The manifest text with its last line replaced by the CRC-32C of everything above it, so that mutated
// manifests get past the checksum to the YAML parsing behind it (without this only the seeds did).
std::string seal_manifest(std::string_view text) {
  constexpr std::string_view kSelf = "manifest_crc32c: \"";
  const size_t at = text.rfind(kSelf);
  std::string body(at != std::string_view::npos && (at == 0 || text[at - 1] == '\n') ? text.substr(0, at) : text);
  if (!body.empty() && body.back() != '\n') body += '\n';
  return body + fmt::format("manifest_crc32c: \"{:08x}\"\n", crc32c(body.data(), body.size()));
}

void check_manifest(std::string_view text) {
  expect_clean([&] {
    const Manifest m = parse_manifest(text, "manifest.yaml");
    // What parses must write back to the same text.
    const Manifest again = parse_manifest(manifest_to_yaml(m), "again");
    if (again.files != m.files || again.step != m.step) std::abort();
  });
}

}  // namespace

int checkpoint(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 7) {
    case 0:
      check_manifest(rest);
      break;
    case 1:
      expect_clean([&] { parse_checkpoint_state(rest, "state.yaml"); });
      break;
    case 2: {
      // optimizer.bin: the header, and the state size it claims against the bytes.
      const BinaryFile file = BinaryFile::in_memory(rest, "optimizer.bin", "optimizer state");
      expect_clean([&] { read_optimizer_header(file); });
      break;
    }
    case 3: {
      // Whatever the header claims: the readers check the claim against the bytes before allocating from it.
      const BinaryFile file = BinaryFile::in_memory(rest, "model.bin", "model file");
      std::array<int32_t, 8> raw{};
      std::memcpy(raw.data(), rest.data(), std::min(rest.size(), sizeof(raw)));
      const LlmcModelHeader claimed{raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]};
      expect_clean([&] { read_llmc_header(file); });
      expect_clean([&] { read_llmc_parameters(file, claimed); });
      break;
    }
    case 4: {
      // A checkpoint directory with this manifest (sealed, so verification gets to the files it lists) and
      // two small files it may refer to.
      // The two files never change (verification only reads), so they are written once per process.
      static const fs::path dir = [] {
        const fs::path d = scratch() / "step_00000001";
        fs::create_directories(d);
        write_input(d / "model.bin", "abc");
        write_input(d / "state.yaml", "step: 1\nseed: 2\nloader: {}\n");
        return d;
      }();
      write_input(dir / kManifestFile, seal_manifest(rest));
      expect_clean([&] { verify_checkpoint(dir.string()); });
      break;
    }
    case 5:
      check_manifest(seal_manifest(rest));
      break;
    case 6: {
      // An optimizer shard of a model with as many parameters as its header says (up to 2^40), so that the
      // range table is checked beyond the header's parameter count.
      std::array<uint32_t, 7> raw{};
      std::memcpy(raw.data(), rest.data(), std::min(rest.size(), sizeof(raw)));
      const auto num_parameters = static_cast<int64_t>((uint64_t{raw[6]} << 32 | raw[5]) & ((uint64_t{1} << 40) - 1));
      expect_clean([&] {
        check_optimizer_shard(BinaryFile::in_memory(rest, "optimizer.rank00000-of-00001.bin", "optimizer shard"),
                              num_parameters);
      });
      break;
    }
  }
  return 0;
}

int byte_tokenizer(const uint8_t* data, size_t size) {
  ByteTokenizer tok;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<int> ids = tok.encode(text);
  if (tok.decode(ids) != text) std::abort();
  std::vector<int> arbitrary(size / 4);
  if (!arbitrary.empty()) std::memcpy(arbitrary.data(), data, arbitrary.size() * 4);
  expect_clean([&] { tok.decode(arbitrary); });
  return 0;
}

int safetensors(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  expect_clean([&] { parse_safetensors_header(bytes, size, "fuzz.safetensors"); });
  expect_clean([&] {
    const SafetensorsReader reader(BinaryFile::in_memory(bytes, "fuzz.safetensors", "safetensors file"));
    for (const SafetensorsEntry& e : reader.header().tensors) {
      std::vector<float> out(e.numel());
      expect_clean([&] { reader.read_f32(e, out); });
    }
  });
  return 0;
}

int gpt2_tokenizer(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t a = std::min(in.find('\0'), in.size());
  const size_t b = std::min(in.find('\0', std::min(a + 1, in.size())), in.size());
  const std::string vocab(in.substr(0, a)), merges(in.substr(std::min(a + 1, in.size()), b - std::min(a + 1, b)));
  const std::string text(in.substr(std::min(b + 1, in.size())));
  expect_clean([&] {
    const Gpt2Tokenizer tok(vocab, "vocab.json", merges, "merges.txt");
    if (tok.decode(tok.encode(text)) != text) std::abort();
  });
  // Bytes 0-255 under GPT-2's alphabet, plus merges that chain ("Ġt", "Ġth", "he") and overlap ("aa").
  static const Gpt2Tokenizer small = [] {
    std::string json = "{";
    int id = 0, shifted = 0;
    for (int c = 0; c < 256; ++c) {
      const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
      const int u = printable ? c : 256 + shifted++;
      std::string key;
      if (u < 0x80) {
        key = u == '"' ? "\\\"" : u == '\\' ? "\\\\" : std::string(1, static_cast<char>(u));
      } else {
        key = {static_cast<char>(0xC0 | (u >> 6)), static_cast<char>(0x80 | (u & 0x3F))};
      }
      json += "\"" + key + "\":" + std::to_string(id++) + ",";
    }
    for (const char* merged : {"\u0120t", "\u0120th", "he", "aa", "\u0120a"})
      json += std::string("\"") + merged + "\":" + std::to_string(id++) + ",";
    json += "\"<|endoftext|>\":" + std::to_string(id) + "}";
    return Gpt2Tokenizer(json, "small.json", "#version: 0.2\n\u0120 t\n\u0120t h\nh e\na a\n\u0120 a\n", "small.bpe");
  }();
  if (small.decode(small.encode(in)) != in) std::abort();
  return 0;
}

const std::vector<Target>& targets() {
  static const std::vector<Target> kTargets = {
      {"config_loader", config_loader},
      {"token_shard", token_shard},
      {"checkpoint", checkpoint},
      {"byte_tokenizer", byte_tokenizer},
      {"safetensors", safetensors},
      {"gpt2_tokenizer", gpt2_tokenizer},
  };
  return kTargets;
}

}  // namespace gpt::fuzz

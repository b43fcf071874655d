#include "io/llmc_model_file.h"

#include "io/durable_file.h"

#include <bit>
#include <numeric>
#include <optional>
#include <vector>

#include "core/error.h"

namespace gpt {

// Header and parameters are read and written as raw memory; every machine this trainer targets is little-endian.
static_assert(std::endian::native == std::endian::little, "llm.c model files are little-endian; add byte swapping");

namespace {

// The header as (name, value) pairs, for checks and messages that name the field.
std::array<std::pair<const char*, int>, 6> header_fields(const LlmcModelHeader& h) {
  return {{{"max_seq_len", h.max_seq_len},
           {"vocab_size", h.vocab_size},
           {"num_layers", h.num_layers},
           {"num_heads", h.num_heads},
           {"channels", h.channels},
           {"padded_vocab_size", h.padded_vocab_size}}};
}

// The file a header describes: the header and every parameter tensor, in overflow-checked arithmetic (int32
// fields let L x 4C x C pass 2^64). Per layer: ln1 and ln2 2C each, qkv 3C^2 + 3C, attproj C^2 + C,
// fc 4C^2 + 4C, fcproj 4C^2 + C, together 12C^2 + 13C.
std::optional<uint64_t> file_bytes_of(const LlmcModelHeader& h) {
  const auto Vp = static_cast<uint64_t>(h.padded_vocab_size);
  const auto maxT = static_cast<uint64_t>(h.max_seq_len);
  const auto L = static_cast<uint64_t>(h.num_layers);
  const auto C = static_cast<uint64_t>(h.channels);
  constexpr uint64_t f = sizeof(float);
  ClaimedSize claim;
  claim.add({kLlmcHeaderBytes}).add({Vp, C, f}).add({maxT, C, f}).add({L, 12, C, C, f}).add({L, 13, C, f});
  return claim.add({2, C, f}).bytes();
}

void validate_header(const LlmcModelHeader& h, const std::string& where) {
  for (const auto& [name, value] : header_fields(h))
    GPT_CHECK(value > 0, "{}: {} is {}, expected a positive value", where, name, value);
  GPT_CHECK(h.channels % h.num_heads == 0, "{}: channels {} is not divisible by num_heads {}", where, h.channels,
            h.num_heads);
  GPT_CHECK(h.padded_vocab_size >= h.vocab_size, "{}: padded_vocab_size {} is smaller than vocab_size {}", where,
            h.padded_vocab_size, h.vocab_size);
  GPT_CHECK(file_bytes_of(h).has_value(),
            "{}: num_layers {}, channels {}, padded_vocab_size {} and max_seq_len {} describe more than 2^64 bytes "
            "of parameters",
            where, h.num_layers, h.channels, h.padded_vocab_size, h.max_seq_len);
}

// Magic, version and the fields, without the file's size: a reader with an expected header names the fields
// that differ before it says the size is wrong.
LlmcModelHeader parse_header(const BinaryFile& file) {
  GPT_CHECK(file.size() >= kLlmcHeaderBytes, "{} is {} bytes, shorter than the {}-byte llm.c header", file.label(),
            file.size(), kLlmcHeaderBytes);
  std::array<int32_t, kLlmcHeaderInts> raw{};
  file.read_into(0, std::span(raw));
  GPT_CHECK(raw[0] == kLlmcModelMagic, "{} has magic {}, expected {} (llm.c GPT-2 model){}", file.label(), raw[0],
            kLlmcModelMagic, raw[0] == 20240520 ? "; it looks like a token shard" : "");
  GPT_CHECK(raw[1] != kLlmcModelVersionBf16,
            "{} is llm.c version 5 (bf16 parameters); only fp32 version 3 is supported — use the fp32 "
            "export (llm.c's train_gpt2.py writes gpt2_124M.bin next to gpt2_124M_bf16.bin)",
            file.label());
  GPT_CHECK(raw[1] == kLlmcModelVersionFp32, "{} has version {}; only fp32 version 3 is supported", file.label(),
            raw[1]);
  const LlmcModelHeader header{raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]};
  validate_header(header, file.label());
  return header;
}

void require_file_size(const BinaryFile& file, const LlmcModelHeader& h) {
  file.require_size(file_bytes_of(h),
                    fmt::format("the {}-byte header and {} fp32 parameters (max_seq_len {}, padded_vocab_size {}, "
                                "num_layers {}, channels {})",
                                kLlmcHeaderBytes, h.num_parameters(), h.max_seq_len, h.padded_vocab_size,
                                h.num_layers, h.channels));
}

BinaryFile open_model(const std::string& path) { return BinaryFile::open(path, "model file"); }

}  // namespace

std::array<size_t, kLlmcNumParameterTensors> LlmcModelHeader::parameter_sizes() const {
  const auto Vp = static_cast<size_t>(padded_vocab_size);
  const auto maxT = static_cast<size_t>(max_seq_len);
  const auto L = static_cast<size_t>(num_layers);
  const auto C = static_cast<size_t>(channels);
  return {Vp * C,        maxT * C,  L * C,         L * C,  L * 3 * C * C, L * 3 * C, L * C * C, L * C,
          L * C,         L * C,     L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C,   C,         C};
}

size_t LlmcModelHeader::num_parameters() const {
  const auto sizes = parameter_sizes();
  return std::accumulate(sizes.begin(), sizes.end(), size_t{0});
}

LlmcModelHeader llmc_header_of(const ModelConfig& m) {
  return LlmcModelHeader{m.context_length, m.vocab_size, m.n_layer, m.n_head, m.n_embd, m.padded_vocab_size()};
}

LlmcModelHeader read_llmc_header(const BinaryFile& file) {
  const LlmcModelHeader header = parse_header(file);
  require_file_size(file, header);
  return header;
}

LlmcModelHeader read_llmc_header(const std::string& path) { return read_llmc_header(open_model(path)); }

LlmcModelHeader read_llmc_header_fields(const std::string& path) { return parse_header(open_model(path)); }

std::vector<float> read_llmc_parameters(const BinaryFile& file, const LlmcModelHeader& expected) {
  const LlmcModelHeader found = parse_header(file);
  std::vector<std::string> differences;
  const auto want = header_fields(expected);
  const auto got = header_fields(found);
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i].second != got[i].second)
      differences.push_back(fmt::format("{} is {} in the file, expected {}", got[i].first, got[i].second,
                                        want[i].second));
  GPT_CHECK(differences.empty(), "{} does not match the model: {}", file.label(), fmt::join(differences, "; "));
  require_file_size(file, found);
  std::vector<float> params(found.num_parameters());
  file.read_into(kLlmcHeaderBytes, std::span(params));
  return params;
}

std::vector<float> read_llmc_parameters(const std::string& path, const LlmcModelHeader& expected) {
  return read_llmc_parameters(open_model(path), expected);
}

void write_llmc_model(const std::string& path, const LlmcModelHeader& header, std::span<const float> params) {
  validate_header(header, fmt::format("cannot write model file {}", path));
  GPT_CHECK(params.size() == header.num_parameters(),
            "cannot write model file {}: {} parameters given, the header describes {}", path, params.size(),
            header.num_parameters());
  std::array<int32_t, kLlmcHeaderInts> raw{};
  raw[0] = kLlmcModelMagic;
  raw[1] = kLlmcModelVersionFp32;
  raw[2] = header.max_seq_len;
  raw[3] = header.vocab_size;
  raw[4] = header.num_layers;
  raw[5] = header.num_heads;
  raw[6] = header.channels;
  raw[7] = header.padded_vocab_size;

  replace_file_durably(path, {std::as_bytes(std::span(raw)), std::as_bytes(params)});
}

}  // namespace gpt

#include "io/llmc_model_file.h"

#include "io/durable_file.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace gpt {

// Header and parameters are read and written as raw memory; every machine this trainer targets is little-endian.
static_assert(std::endian::native == std::endian::little, "llm.c model files are little-endian; add byte swapping");

namespace fs = std::filesystem;

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

void validate_header(const LlmcModelHeader& h, const std::string& where) {
  for (const auto& [name, value] : header_fields(h))
    GPT_CHECK(value > 0, "{}: {} is {}, expected a positive value", where, name, value);
  GPT_CHECK(h.channels % h.num_heads == 0, "{}: channels {} is not divisible by num_heads {}", where, h.channels,
            h.num_heads);
  GPT_CHECK(h.padded_vocab_size >= h.vocab_size, "{}: padded_vocab_size {} is smaller than vocab_size {}", where,
            h.padded_vocab_size, h.vocab_size);
}

std::ifstream open_model(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  GPT_CHECK(fs::exists(status), "model file {} does not exist", path);
  GPT_CHECK(fs::is_regular_file(status), "model file {} is not a regular file", path);
  std::ifstream in(path, std::ios::binary);
  GPT_CHECK(in.is_open(), "cannot open model file {}: {}", path, std::strerror(errno));
  return in;
}

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

LlmcModelHeader read_llmc_header(const std::string& path) {
  std::ifstream in = open_model(path);
  const uint64_t file_bytes = fs::file_size(path);
  GPT_CHECK(file_bytes >= kLlmcHeaderBytes, "model file {} is {} bytes, shorter than the {}-byte llm.c header", path,
            file_bytes, kLlmcHeaderBytes);
  std::array<int32_t, kLlmcHeaderInts> raw{};
  in.read(reinterpret_cast<char*>(raw.data()), kLlmcHeaderBytes);
  GPT_CHECK(in.gcount() == static_cast<std::streamsize>(kLlmcHeaderBytes),
            "model file {}: could not read its {}-byte header", path, kLlmcHeaderBytes);
  GPT_CHECK(raw[0] == kLlmcModelMagic, "model file {} has magic {}, expected {} (llm.c GPT-2 model){}", path, raw[0],
            kLlmcModelMagic, raw[0] == 20240520 ? "; it looks like a token shard" : "");
  GPT_CHECK(raw[1] != kLlmcModelVersionBf16,
            "model file {} is llm.c version 5 (bf16 parameters); only fp32 version 3 is supported — use the fp32 "
            "export (llm.c's train_gpt2.py writes gpt2_124M.bin next to gpt2_124M_bf16.bin)",
            path);
  GPT_CHECK(raw[1] == kLlmcModelVersionFp32, "model file {} has version {}; only fp32 version 3 is supported", path,
            raw[1]);
  const LlmcModelHeader header{raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]};
  validate_header(header, fmt::format("model file {}", path));
  return header;
}

void read_llmc_parameters(const std::string& path, const LlmcModelHeader& expected, std::span<float> out) {
  const LlmcModelHeader found = read_llmc_header(path);
  std::vector<std::string> differences;
  const auto want = header_fields(expected);
  const auto got = header_fields(found);
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i].second != got[i].second)
      differences.push_back(fmt::format("{} is {} in the file, expected {}", got[i].first, got[i].second,
                                        want[i].second));
  GPT_CHECK(differences.empty(), "model file {} does not match the model: {}", path,
            fmt::join(differences, "; "));

  const size_t n = expected.num_parameters();
  GPT_CHECK(out.size() == n, "reading model file {}: the parameter buffer holds {} floats, the model has {}", path,
            out.size(), n);
  const uint64_t file_bytes = fs::file_size(path);
  const uint64_t want_bytes = kLlmcHeaderBytes + n * sizeof(float);
  GPT_CHECK(file_bytes == want_bytes,
            "model file {} is {} bytes, expected {} (the {}-byte header + {} fp32 parameters)", path, file_bytes,
            want_bytes, kLlmcHeaderBytes, n);

  std::ifstream in = open_model(path);
  in.seekg(static_cast<std::streamoff>(kLlmcHeaderBytes));
  const auto bytes = static_cast<std::streamsize>(out.size_bytes());
  in.read(reinterpret_cast<char*>(out.data()), bytes);
  GPT_CHECK(in.gcount() == bytes, "model file {}: read {} of its {} parameter bytes; did the file change?", path,
            in.gcount(), bytes);
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

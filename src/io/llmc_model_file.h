// llm.c GPT-2 model files (karpathy/llm.c train_gpt2.py write_model): a header of 256 little-endian int32 —
// [0] magic 20240326, [1] version (3: fp32 parameters, 5: bf16), [2] max_seq_len, [3] vocab_size,
// [4] num_layers, [5] num_heads, [6] channels, [7] padded_vocab_size — then every parameter tensor, back to
// back, in the order of kLlmcParameterNames. Only version 3 (fp32) is read and written here.
#pragma once

#include "config/config.h"
#include "io/binary_file.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpt {

inline constexpr int32_t kLlmcModelMagic = 20240326;
inline constexpr int32_t kLlmcModelVersionFp32 = 3;
inline constexpr int32_t kLlmcModelVersionBf16 = 5;
inline constexpr size_t kLlmcHeaderInts = 256;
inline constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);
inline constexpr size_t kLlmcNumParameterTensors = 16;

// Shapes with L layers, C channels, Vp padded vocab, maxT positions:
// wte[Vp,C] wpe[maxT,C] ln1w[L,C] ln1b[L,C] qkvw[L,3C,C] qkvb[L,3C] attprojw[L,C,C] attprojb[L,C]
// ln2w[L,C] ln2b[L,C] fcw[L,4C,C] fcb[L,4C] fcprojw[L,C,4C] fcprojb[L,C] lnfw[C] lnfb[C]
inline constexpr std::array<std::string_view, kLlmcNumParameterTensors> kLlmcParameterNames = {
    "wte",  "wpe",      "ln1w", "ln1b", "qkvw", "qkvb",    "attprojw", "attprojb",
    "ln2w", "ln2b",     "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw",     "lnfb"};

struct LlmcModelHeader {
  int max_seq_len = 0;
  int vocab_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int channels = 0;
  int padded_vocab_size = 0;

  // Element counts of the tensors, in kLlmcParameterNames order: only for a header that the readers or the
  // writer accepted, whose sizes are known not to overflow.
  std::array<size_t, kLlmcNumParameterTensors> parameter_sizes() const;
  size_t num_parameters() const;
  bool operator==(const LlmcModelHeader&) const = default;
};

// The header of a model of this configuration (the file a checkpoint's model.bin must be).
LlmcModelHeader llmc_header_of(const ModelConfig& model);

// Reads and checks the header: magic, version 3, positive sizes, heads dividing channels, padded vocab ≥ vocab,
// and that the file is exactly the header and the parameters it describes (the error says what the header
// claims and how many bytes the file holds).
LlmcModelHeader read_llmc_header(const BinaryFile& file);
LlmcModelHeader read_llmc_header(const std::string& path);
// The same checks but the file's size: what model.init_from's shape is read from at config load, so that a
// model key that differs is named before a size that is wrong (read_llmc_parameters checks that).
LlmcModelHeader read_llmc_header_fields(const std::string& path);

// All parameters, from a file whose header must equal expected: throws naming every field that differs, or
// the file's size against what its header claims. Allocates only after both checks, so a header claiming
// billions of parameters in a 1 KiB file costs nothing.
std::vector<float> read_llmc_parameters(const BinaryFile& file, const LlmcModelHeader& expected);
std::vector<float> read_llmc_parameters(const std::string& path, const LlmcModelHeader& expected);

// Writes a version 3 file to "<path>.tmp" and renames it to path.
void write_llmc_model(const std::string& path, const LlmcModelHeader& header, std::span<const float> params);

}  // namespace gpt

#include "io/llmc_model_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "test_util.h"

namespace gpt {
namespace {

using test::error_message;
using test::TempDir;
using test::write_bytes;
using ::testing::HasSubstr;

// maxT 8, vocab 10 padded to 16, 2 layers, 2 heads, 4 channels.
constexpr LlmcModelHeader kTiny{8, 10, 2, 2, 4, 16};

std::vector<float> make_params(size_t n) {
  std::vector<float> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(i) * 0.37f - 11.0f;
  return p;
}

TEST(LlmcModelFile, CountsGpt2SmallLikeLlmc) {
  const LlmcModelHeader gpt2{1024, 50257, 12, 12, 768, 50304};
  EXPECT_EQ(gpt2.num_parameters(), 124475904u);  // llm.c train_gpt2: "num_parameters: 124475904"
}

TEST(LlmcModelFile, ParameterSizesFollowLlmcOrder) {
  const size_t C = 4, L = 2;
  const std::array<size_t, 16> want{16 * C, 8 * C,     L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
                                    L * C,  L * C,     L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C};
  EXPECT_EQ(kTiny.parameter_sizes(), want);
  EXPECT_EQ(kLlmcParameterNames[4], "qkvw");
  EXPECT_EQ(kLlmcParameterNames[15], "lnfb");
}

TEST(LlmcModelFile, RoundTrips) {
  TempDir dir;
  const std::string path = dir.file("model.bin");
  const std::vector<float> params = make_params(kTiny.num_parameters());
  write_llmc_model(path, kTiny, params);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path), 1024 + 4 * params.size());

  EXPECT_EQ(read_llmc_header(path), kTiny);
  const std::vector<float> back = read_llmc_parameters(path, kTiny);
  ASSERT_EQ(back.size(), params.size());
  EXPECT_EQ(std::memcmp(back.data(), params.data(), params.size() * sizeof(float)), 0);

  std::ifstream in(path, std::ios::binary);
  std::array<int32_t, 256> header{};
  in.read(reinterpret_cast<char*>(header.data()), sizeof(header));
  EXPECT_EQ(header[0], 20240326);
  EXPECT_EQ(header[1], 3);
  EXPECT_EQ(header[7], 16);
  EXPECT_EQ(header[8], 0);
}

TEST(LlmcModelFile, HeaderMismatchNamesEachField) {
  TempDir dir;
  const std::string path = dir.file("model.bin");
  write_llmc_model(path, kTiny, make_params(kTiny.num_parameters()));
  LlmcModelHeader expected = kTiny;
  expected.num_layers = 3;
  expected.channels = 8;
  const std::string msg = error_message([&] { read_llmc_parameters(path, expected); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("num_layers is 2 in the file, expected 3"));
  EXPECT_THAT(msg, HasSubstr("channels is 4 in the file, expected 8"));
  EXPECT_THAT(msg, ::testing::Not(HasSubstr("vocab_size is")));
}

TEST(LlmcModelFile, WrongSizeIsReported) {
  TempDir dir;
  const std::string path = dir.file("model.bin");
  std::vector<float> params = make_params(kTiny.num_parameters());
  write_llmc_model(path, kTiny, params);
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out.write("abcd", 4);
  }
  const size_t want = 1024 + 4 * params.size();
  const std::string claim = "its header claims the 1024-byte header and " + std::to_string(params.size()) +
                            " fp32 parameters (max_seq_len 8, padded_vocab_size 16, num_layers 2, channels 4), " +
                            std::to_string(want) + " bytes in all, but the file holds ";
  std::string msg = error_message([&] { read_llmc_parameters(path, kTiny); });
  EXPECT_THAT(msg, HasSubstr("model file " + path + ": " + claim + std::to_string(want + 4) +
                             " bytes (4 bytes of trailing data)"));
  EXPECT_EQ(error_message([&] { read_llmc_header(path); }), msg) << "the header reader checks the size too";

  std::filesystem::resize_file(path, want - 8);
  msg = error_message([&] { read_llmc_parameters(path, kTiny); });
  EXPECT_THAT(msg, HasSubstr(claim + std::to_string(want - 8) + " bytes (8 bytes missing: truncated"));
}

// The fault of issue 20: a 1 KiB file whose header claims GPT-2 XL-sized tensors (here 2^31 - 1 of almost
// everything) made init_from and sample allocate what the header claimed before looking at the file.
TEST(LlmcModelFile, HugeClaimFailsOnTheSizeBeforeAllocating) {
  TempDir dir;
  const std::string path = dir.file("model.bin");
  std::array<int32_t, 256> header{};
  header[0] = kLlmcModelMagic;
  header[1] = kLlmcModelVersionFp32;
  const LlmcModelHeader claimed{1024, 50257, 48, 25, 1600, 50304};  // GPT-2 XL: 1557686400 parameters
  header[2] = claimed.max_seq_len, header[3] = claimed.vocab_size, header[4] = claimed.num_layers;
  header[5] = claimed.num_heads, header[6] = claimed.channels, header[7] = claimed.padded_vocab_size;
  write_bytes(path, header.data(), sizeof(header));
  const std::string msg = error_message([&] { read_llmc_parameters(path, claimed); });
  EXPECT_THAT(msg, HasSubstr("model file " + path + ": its header claims the 1024-byte header and 1557686400 fp32 "
                             "parameters"));
  EXPECT_THAT(msg, HasSubstr("6230746624 bytes in all, but the file holds 1024 bytes (6230745600 bytes missing"));

  // Sizes whose product passes 2^64 are refused as such, not wrapped around to a small size.
  header[2] = header[3] = header[4] = header[5] = header[6] = header[7] = 2147483647;
  write_bytes(path, header.data(), sizeof(header));
  EXPECT_THAT(error_message([&] { read_llmc_header(path); }),
              HasSubstr("num_layers 2147483647, channels 2147483647, padded_vocab_size 2147483647 and max_seq_len "
                        "2147483647 describe more than 2^64 bytes of parameters"));
}

TEST(LlmcModelFile, ReadsFromMemory) {
  TempDir dir;
  const std::string path = dir.file("model.bin");
  const std::vector<float> params = make_params(kTiny.num_parameters());
  write_llmc_model(path, kTiny, params);
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const BinaryFile file = BinaryFile::in_memory(bytes, "mem.bin", "model file");
  EXPECT_EQ(read_llmc_header(file), kTiny);
  EXPECT_EQ(read_llmc_parameters(file, kTiny), params);
}

TEST(LlmcModelFile, HeaderOfAConfigMatchesTheFileItsCheckpointsWrite) {
  ModelConfig m;
  m.vocab_size = 10, m.vocab_pad_multiple = 16, m.context_length = 8, m.n_layer = 2, m.n_head = 2, m.n_embd = 4;
  EXPECT_EQ(llmc_header_of(m), kTiny);
}

TEST(LlmcModelFile, RejectsOtherMagicAndVersions) {
  TempDir dir;
  const std::string path = dir.file("model.bin");
  std::array<int32_t, 256> header{};
  header[0] = 12345;
  header[1] = 3;
  write_bytes(path, header.data(), sizeof(header));
  std::string msg = error_message([&] { read_llmc_header(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("has magic 12345, expected 20240326"));

  header[0] = kLlmcModelMagic;
  header[1] = 5;
  write_bytes(path, header.data(), sizeof(header));
  msg = error_message([&] { read_llmc_header(path); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("bf16"));
  EXPECT_THAT(msg, HasSubstr("only fp32 version 3 is supported"));

  header[1] = 3;
  header[2] = 8;  // max_seq_len; vocab_size (header[3]) is left 0
  write_bytes(path, header.data(), sizeof(header));
  EXPECT_THAT(error_message([&] { read_llmc_header(path); }), HasSubstr("vocab_size is 0"));

  write_bytes(path, header.data(), 100);
  EXPECT_THAT(error_message([&] { read_llmc_header(path); }), HasSubstr("is 100 bytes, shorter than the 1024-byte"));
  EXPECT_THAT(error_message([&] { read_llmc_header(dir.file("none.bin")); }), HasSubstr("does not exist"));
}

TEST(LlmcModelFile, WriteChecksItsArguments) {
  TempDir dir;
  const std::string path = dir.file("model.bin");
  std::vector<float> params(kTiny.num_parameters() - 1);
  EXPECT_THAT(error_message([&] { write_llmc_model(path, kTiny, params); }), HasSubstr(path));
  LlmcModelHeader bad = kTiny;
  bad.num_heads = 3;
  params.resize(bad.num_parameters());
  EXPECT_THAT(error_message([&] { write_llmc_model(path, bad, params); }), HasSubstr("not divisible by num_heads 3"));
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace gpt

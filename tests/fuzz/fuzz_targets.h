// The fuzz targets over hostile input: each takes arbitrary bytes and must either accept them or throw
// gpt::Error (a clear message), never crash, hang, leak or hit undefined behaviour. libFuzzer drives them
// under ASan/UBSan (GPT_FUZZ=ON, scripts/fuzz.sh); gpt_tests replays every file of their corpora
// (tests/fuzz/<target>/) as regression tests in every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpt::fuzz {

// load_config_from_string on the bytes before the first NUL; each line after it is a --set override.
int config_loader(const uint8_t* data, size_t size);
// The bytes as a token shard file, read from memory: read_shard_header, then read_shard with vocabularies
// 256 and 65536, whose tokens must be the bytes after the header.
int token_shard(const uint8_t* data, size_t size);
// The checkpoint readers; the first byte (mod 7) picks one: 0 manifest.yaml as given (its checksum is
// checked), 1 state.yaml, 2 optimizer.bin (header and the size it claims), 3 model.bin (llm.c, any claimed
// size), 4 a whole checkpoint directory whose manifest is the rest, 5 manifest.yaml with its checksum line
// recomputed so that the YAML behind it is parsed (4 recomputes it too), 6 an optimizer shard's header and
// range table.
int checkpoint(const uint8_t* data, size_t size);
// Byte tokenizer: decode(encode(text)) == text, and decoding arbitrary ids (4 bytes each) fails cleanly.
int byte_tokenizer(const uint8_t* data, size_t size);
// The bytes as a safetensors file: the header parser, then every float tensor read through the reader
// (over the bytes in memory, as SafetensorsReader(BinaryFile) reads them).
int safetensors(const uint8_t* data, size_t size);
// GPT-2 BPE: up to the first NUL a vocabulary JSON, up to the second a merges file, the rest text. Files
// that load must round-trip the text; the text also round-trips through a fixed small vocabulary.
int gpt2_tokenizer(const uint8_t* data, size_t size);

struct Target {
  const char* name;  // also the corpus directory tests/fuzz/<name>/
  int (*run)(const uint8_t* data, size_t size);
};
const std::vector<Target>& targets();

}  // namespace gpt::fuzz

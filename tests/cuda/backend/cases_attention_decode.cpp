// Op table cases of attention_decode (cuda/kernels/attention_decode.cu against the CPU's composition of
// ops): qkv and the caches in each format the recipes compute in, out in the same format and in E4M3 with
// scaling state (the FP8 recipe's attention output, were it stored directly); one head and three; head
// sizes 13 (odd: two groups of threads, none on a warp boundary), 64 (the GPT-2 one: two groups) and 128
// (one group); a cache of capacity 67 attended at length 1 (a single key: the new one), 40 and 67 (full),
// where one block takes each head; head size 512, where a lane reads two packs of a key; and long caches that the kernel splits over several blocks a head and
// combines (FlashDecoding): 129 positions (two chunks of 65, the new key in the second), 300 of 300 (three)
// and 517 of 600 (five, the last shorter).
// The caches start random (the earlier positions') and are compared whole: the op must write row
// length-1 of every head and nothing else.
#include "cuda/backend/op_table.h"

#include <cmath>

namespace gpt::test {
namespace {

struct DecodePoint {
  int64_t heads, head_size, capacity, length;
  DType format, out_format;
  std::string name() const {
    return fmt::format("attention_decode/{}{}/nh{}_hs{}_len{}of{}", format_tag(format),
                       out_format == format ? "" : "_to_" + format_tag(out_format), heads, head_size, length, capacity);
  }
};

std::vector<DecodePoint> points() {
  std::vector<DecodePoint> out;
  for (DType f : {DType::F32, DType::BF16, DType::F16}) {
    for (int64_t length : {1, 40, 67}) out.push_back({3, 13, 67, length, f, f});
    out.push_back({1, 64, 67, 40, f, f});
    out.push_back({2, 128, 67, 67, f, f});
    out.push_back({3, 13, 300, 129, f, f});
    out.push_back({2, 64, 600, 517, f, f});
  }
  out.push_back({1, 128, 300, 300, DType::F32, DType::F32});
  out.push_back({1, 512, 150, 150, DType::BF16, DType::BF16});  // 64 packs a row: two a lane
  out.push_back({3, 64, 67, 67, DType::BF16, DType::E4M3});
  out.push_back({3, 64, 300, 300, DType::BF16, DType::E4M3});
  return out;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (const DecodePoint& p : points()) {
    out.push_back({p.name(), [=](OpBench& b) {
                     const int64_t C = p.heads * p.head_size;
                     Tensor qkv = b.input({3 * C}, p.format);
                     Tensor k_cache = b.accumulated({p.heads, p.capacity, p.head_size}, p.format);
                     Tensor v_cache = b.accumulated({p.heads, p.capacity, p.head_size}, p.format);
                     Tensor o = b.output({C}, p.out_format);
                     if (p.out_format == DType::E4M3) o.scaling = b.fp8_meta(64.0f);
                     const float scale = 1.0f / std::sqrt(static_cast<float>(p.head_size));
                     b.backend().attention_decode({o, qkv, k_cache, v_cache, b.scratch({p.heads, p.capacity}, DType::F32),
                                                   p.length, scale});
                   }});
  }
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test

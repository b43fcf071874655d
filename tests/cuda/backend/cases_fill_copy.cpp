// Op table cases of fill and copy (cuda/kernels/fill_copy.cu): every float format, odd sizes.
#include "cuda/backend/op_table.h"

namespace gpt::test {
namespace {

std::vector<OpCase> cases() {
  std::vector<OpCase> out;
  for (DType f : kTableFormats) {
    for (int64_t n : {1, 67, 4099}) {
      out.push_back({fmt::format("fill/{}/n{}", format_tag(f), n), [=](OpBench& b) {
                       b.backend().fill({b.output({n}, f), 0.375f});
                     }});
      out.push_back({fmt::format("copy/{}/n{}", format_tag(f), n), [=](OpBench& b) {
                       Tensor in = b.input({n}, f);
                       b.backend().copy({b.output({n}, f), in});
                     }});
    }
  }
  return out;
}

const OpCases registered(cases());

}  // namespace
}  // namespace gpt::test

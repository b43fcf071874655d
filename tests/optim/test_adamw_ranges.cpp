// AdamW over ranges of the parameters (what a ZeRO-1 rank owns): two optimizers owning complementary
// ranges, fed the same gradients, update the weights as one optimizer owning everything. The update is
// elementwise, but the CPU kernel's vectorised body and scalar tail may contract multiply-adds
// differently, and splitting a tensor moves elements between them: the weights agree to a few ulp.
#include "optim/adamw.h"

#include "core/random.h"
#include "model/gpt.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt::test {
namespace {

TEST(AdamWRanges, ComplementaryRangesEqualTheWholeModel) {
  auto backend = make_backend(BackendKind::Cpu, {1});
  GPT whole_model(tiny_model(16, 2, 16, 2, 8), 2, 8, *backend), split_model(tiny_model(16, 2, 16, 2, 8), 2, 8, *backend);
  whole_model.init_weights(3);
  split_model.init_weights(3);
  OptimConfig config;
  const ParameterLayout& layout = whole_model.parameter_layout();
  AdamW whole(config, layout, *backend);
  EXPECT_TRUE(whole.owns_all());
  EXPECT_EQ(whole.num_elements(), whole_model.num_parameters());

  // Split every tensor at an odd point between two "ranks".
  std::vector<ParamRange> first, second;
  for (size_t i = 0; i < layout.specs().size(); ++i) {
    const auto n = static_cast<int64_t>(layout.arena_layout().buffer(i).bytes / 4);
    const int64_t cut = n / 3 + 1;
    first.push_back({i, 0, cut});
    second.push_back({i, cut, n - cut});
  }
  AdamW a(config, layout, *backend, first), b(config, layout, *backend, second);
  EXPECT_FALSE(a.owns_all());
  EXPECT_EQ(a.num_elements() + b.num_elements(), whole.num_elements());
  EXPECT_LT(a.state_bytes(), whole.state_bytes());

  for (int step = 0; step < 3; ++step) {
    HostRng rng(11, static_cast<uint32_t>(step));
    std::vector<float> grads(static_cast<size_t>(whole_model.gradient_arena().layout().total_bytes() / 4));
    for (float& g : grads) g = static_cast<float>(rng.normal());
    for (GPT* m : {&whole_model, &split_model})
      backend->copy_to_device(m->gradient_arena().base(), grads.data(), grads.size() * 4);
    whole.step(whole_model.parameter_arena(), whole_model.gradient_arena(), 1e-2, 0.5);
    a.step(split_model.parameter_arena(), split_model.gradient_arena(), 1e-2, 0.5);
    // The second half reads its gradients from views, as a reduce-scattered shard would hand them over.
    std::vector<Tensor> views;
    for (const ParamRange& r : second)
      views.push_back(split_model.gradient_arena().tensor(r.tensor).elements(r.offset, r.count));
    b.step(split_model.parameter_arena(), views, 1e-2, 0.5);
  }
  const std::vector<float> pw = whole_model.parameters_to_host(), ps = split_model.parameters_to_host();
  ASSERT_EQ(pw.size(), ps.size());
  for (size_t i = 0; i < pw.size(); ++i) ASSERT_NEAR(ps[i], pw[i], 1e-6 * (std::abs(pw[i]) + 1e-3)) << "element " << i;

  // The moments, range by range, are the whole optimizer's.
  const std::vector<float> all = whole.state_to_host(), sa = a.state_to_host(), sb = b.state_to_host();
  EXPECT_EQ(sa.size() + sb.size(), all.size());
}

TEST(AdamWRanges, RangesOutsideATensorAreErrors) {
  auto backend = make_backend(BackendKind::Cpu, {1});
  GPT model(tiny_model(), 1, 4, *backend);
  const auto n = static_cast<int64_t>(model.parameter_layout().arena_layout().buffer(0).bytes / 4);
  EXPECT_THROW(AdamW(OptimConfig{}, model.parameter_layout(), *backend, {{0, n - 1, 2}}), Error);
  EXPECT_THROW(AdamW(OptimConfig{}, model.parameter_layout(), *backend, {{99, 0, 1}}), Error);
}

}  // namespace
}  // namespace gpt::test

// FP8 scaling state: TE's scale formula and its special cases; delayed scaling's amax window rolls and the
// scale follows max or most_recent with the margin (against a transcription of Transformer Engine's
// roll-based history update); current scaling; the table's update, lookup and checkpoint image.
#include "precision/fp8_scaling.h"

#include "core/error.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>

namespace gpt {
namespace {

Fp8ScalingConfig delayed(int history, AmaxAlgorithm algorithm, int margin = 0) {
  Fp8ScalingConfig c;
  c.mode = Fp8ScalingMode::Delayed;
  c.amax_history = history;
  c.algorithm = algorithm;
  c.margin = margin;
  return c;
}

TEST(Fp8Scale, FormulaAndSpecialAmaxes) {
  EXPECT_EQ(fp8_scale_from_amax(224.0f, 448.0f, 0, 1.0f), 2.0f);
  EXPECT_EQ(fp8_scale_from_amax(224.0f, 448.0f, 1, 1.0f), 1.0f);
  EXPECT_EQ(fp8_scale_from_amax(3.0f, 448.0f, 2, 1.0f), (448.0f / 3.0f) / 4.0f);
  EXPECT_EQ(fp8_scale_from_amax(0.0f, 448.0f, 0, 5.0f), 5.0f) << "amax 0 keeps the previous scale";
  EXPECT_EQ(fp8_scale_from_amax(INFINITY, 448.0f, 0, 5.0f), 5.0f);
  EXPECT_EQ(fp8_scale_from_amax(NAN, 448.0f, 0, 5.0f), 5.0f);
  EXPECT_EQ(fp8_scale_from_amax(-1.0f, 448.0f, 0, 5.0f), 5.0f);
  EXPECT_EQ(fp8_scale_from_amax(0x1p-149f, 448.0f, 0, 5.0f), FLT_MAX) << "a scale overflowing FP32 is clamped";
}

TEST(Fp8DelayedScaling, WindowMaxRollsOverTheHistory) {
  Fp8TensorScaling s(DType::E4M3, delayed(4, AmaxAlgorithm::Max));
  EXPECT_EQ(s.scale(), 1.0f) << "the first step quantises with scale 1";
  EXPECT_EQ(s.fp8_max(), 448.0f);
  const float amaxes[] = {1, 4, 2, 0.5f, 0.25f, 0.1f, 3};
  const float window_max[] = {1, 4, 4, 4, 4, 2, 3};  // the largest of the last four
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(s.update(amaxes[i]), 448.0f / window_max[i]) << "step " << i;
    EXPECT_EQ(s.window_amax(), window_max[i]);
    EXPECT_EQ(s.scale_inv(), 1.0f / s.scale());
  }
}

TEST(Fp8DelayedScaling, MostRecentFollowsTheLastAmaxWithMargin) {
  Fp8TensorScaling s(DType::E5M2, delayed(16, AmaxAlgorithm::MostRecent, 3));
  EXPECT_EQ(s.fp8_max(), 57344.0f);
  for (float a : {10.0f, 1000.0f, 0.5f, 7.0f}) EXPECT_EQ(s.update(a), (57344.0f / a) / 8.0f);
  EXPECT_EQ(s.update(0.0f), (57344.0f / 7.0f) / 8.0f) << "amax 0 keeps the previous scale";
}

TEST(Fp8DelayedScaling, NonFiniteAmaxKeepsTheScaleWhileInTheWindow) {
  Fp8TensorScaling s(DType::E4M3, delayed(3, AmaxAlgorithm::Max));
  s.update(2.0f);
  EXPECT_EQ(s.scale(), 224.0f);
  s.update(NAN);
  EXPECT_EQ(s.scale(), 224.0f);
  s.update(1.0f);
  s.update(1.0f);
  EXPECT_EQ(s.scale(), 224.0f) << "the NaN is still one of the last three";
  s.update(1.0f);
  EXPECT_EQ(s.scale(), 448.0f);

  Fp8TensorScaling r(DType::E4M3, delayed(3, AmaxAlgorithm::MostRecent));
  r.update(2.0f);
  r.update(INFINITY);
  EXPECT_EQ(r.scale(), 224.0f);
  r.update(4.0f);
  EXPECT_EQ(r.scale(), 112.0f);
}

// Transformer Engine's update, transcribed: this step's amax sits in history[0]; the amax is the max over
// the history (or history[0]); then the history rolls by -1 and history[0] is zeroed for the next step.
struct TeReference {
  std::vector<float> history;
  float scale = 1.0f;
  float step(float amax, AmaxAlgorithm algorithm, float fp8_max, int margin) {
    history[0] = amax;
    float a = algorithm == AmaxAlgorithm::Max ? *std::max_element(history.begin(), history.end()) : history[0];
    float sf = (fp8_max / a) / std::pow(2.0f, static_cast<float>(margin));
    if (!(a > 0.0f)) sf = scale;
    if (!std::isfinite(a)) sf = scale;
    if (std::isinf(sf)) sf = FLT_MAX;
    scale = sf;
    std::rotate(history.begin(), history.begin() + 1, history.end());
    history[0] = 0.0f;
    return scale;
  }
};

TEST(Fp8DelayedScaling, MatchesTransformerEnginesRollingHistory) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> log_amax(-12.0f, 12.0f);
  for (int history : {1, 2, 5, 16}) {
    for (AmaxAlgorithm algorithm : {AmaxAlgorithm::Max, AmaxAlgorithm::MostRecent}) {
      for (int margin : {0, 2}) {
        Fp8TensorScaling s(DType::E4M3, delayed(history, algorithm, margin));
        TeReference te{std::vector<float>(static_cast<size_t>(history), 0.0f)};
        for (int step = 0; step < 100; ++step) {
          const float amax = step % 17 == 3 ? 0.0f : std::exp2(log_amax(rng));
          ASSERT_EQ(s.update(amax), te.step(amax, algorithm, 448.0f, margin))
              << "history " << history << " " << amax_algorithm_name(algorithm) << " margin " << margin << " step " << step;
        }
      }
    }
  }
}

TEST(Fp8CurrentScaling, ScaleComesFromTheTensorsOwnAmax) {
  Fp8ScalingConfig c;
  c.mode = Fp8ScalingMode::Current;
  Fp8TensorScaling s(DType::E4M3, c);
  EXPECT_EQ(s.set_current(100.0f), 4.48f);
  EXPECT_EQ(s.set_current(1000.0f), 0.448f) << "no memory of larger earlier amaxes";
  EXPECT_EQ(s.set_current(0.0f), 0.448f);
  EXPECT_THROW(s.update(1.0f), Error) << "update() is delayed scaling";
  Fp8TensorScaling d(DType::E4M3, delayed(4, AmaxAlgorithm::Max));
  EXPECT_THROW(d.set_current(1.0f), Error);
}

TEST(Fp8ScalingTable, UpdatesAllTensorsFromOneAmaxBuffer) {
  Fp8ScalingTable t(delayed(2, AmaxAlgorithm::Max));
  EXPECT_EQ(t.add("h0.qkv.input", DType::E4M3), 0u);
  EXPECT_EQ(t.add("h0.qkv.weight", DType::E4M3), 1u);
  EXPECT_EQ(t.add("h0.qkv.grad_output", DType::E5M2), 2u);
  EXPECT_THROW(t.add("h0.qkv.weight", DType::E4M3), Error);
  EXPECT_THROW(t.add("bad", DType::BF16), Error);
  EXPECT_EQ(t.index("h0.qkv.grad_output"), 2u);
  EXPECT_THROW(t.index("nope"), Error);
  const std::vector<float> amaxes{4.0f, 0.5f, 8.0f};
  t.update(amaxes);
  EXPECT_EQ(t.scales(), (std::vector<float>{112.0f, 896.0f, 7168.0f}));
  EXPECT_THROW(t.update(std::vector<float>{1.0f}), Error);
}

TEST(Fp8ScalingTable, CheckpointImageRestoresExactly) {
  auto make = [](int history) {
    Fp8ScalingTable t(delayed(history, AmaxAlgorithm::Max, 1));
    t.add("a", DType::E4M3);
    t.add("b", DType::E5M2);
    return t;
  };
  Fp8ScalingTable a = make(3);
  for (float x : {1.0f, 3.0f, 0.25f, 2.0f}) a.update(std::vector<float>{x, 2 * x});
  const std::vector<uint8_t> image = a.serialize();

  Fp8ScalingTable b = make(3);
  b.deserialize(image);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i].state(), a[i].state());
  for (float x : {5.0f, 0.0f, 0.125f}) {
    a.update(std::vector<float>{x, x});
    b.update(std::vector<float>{x, x});
    EXPECT_EQ(a.scales(), b.scales());
  }

  Fp8ScalingTable other_history = make(4);
  EXPECT_NE(test::error_message([&] { other_history.deserialize(image); }).find("amax history"), std::string::npos);
  Fp8ScalingTable other_names(delayed(3, AmaxAlgorithm::Max, 1));
  other_names.add("a", DType::E4M3);
  other_names.add("c", DType::E5M2);
  EXPECT_NE(test::error_message([&] { other_names.deserialize(image); }).find("'b'"), std::string::npos);
  std::vector<uint8_t> cut(image.begin(), image.end() - 1);
  EXPECT_NE(test::error_message([&] { make(3).deserialize(cut); }).find("truncated"), std::string::npos);
  std::vector<uint8_t> bad = image;
  bad[0] = 'X';
  EXPECT_THROW(make(3).deserialize(bad), Error);
  Fp8ScalingTable untouched = make(3);
  EXPECT_THROW(untouched.deserialize(cut), Error);
  EXPECT_EQ(untouched.scales(), (std::vector<float>{1.0f, 1.0f})) << "a failed load changes nothing";
}

TEST(Fp8ScalingConfig, ValidatesAndParses) {
  Fp8ScalingConfig c;
  EXPECT_NO_THROW(c.validate());
  c.amax_history = 0;
  EXPECT_THROW(c.validate(), Error);
  c.amax_history = 1;
  c.margin = -1;
  EXPECT_THROW(c.validate(), Error);
  EXPECT_EQ(parse_fp8_scaling_mode("current"), Fp8ScalingMode::Current);
  EXPECT_EQ(parse_amax_algorithm("most_recent"), AmaxAlgorithm::MostRecent);
  EXPECT_EQ(fp8_scaling_mode_name(Fp8ScalingMode::Delayed), "delayed");
  EXPECT_THROW(parse_amax_algorithm("mean"), Error);
}

}  // namespace
}  // namespace gpt

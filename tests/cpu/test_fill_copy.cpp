#include "cpu/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpt {
namespace {

using test::cpu_backend;
using test::view;

TEST(CpuFill, SetsEveryElementInEachDtype) {
  std::vector<float> f(1000, NAN);
  cpu_backend().fill({view(f, {10, 100}), 2.5f});
  for (float x : f) ASSERT_EQ(x, 2.5f);

  std::vector<double> d(77, NAN);
  cpu_backend().fill({view(d, {7, 11}), -1.25f});
  for (double x : d) ASSERT_EQ(x, -1.25);

  std::vector<int32_t> ids(13, 99);
  cpu_backend().fill({view(ids, {13}), -1.0f});
  for (int32_t x : ids) ASSERT_EQ(x, -1);
}

TEST(CpuCopy, CopiesAcrossShapesOfEqualCount) {
  std::vector<double> in = test::random_vector(60, 1);
  std::vector<double> out(60, NAN);
  cpu_backend().copy({view(out, {3, 4, 5}), view(in, {12, 5})});
  EXPECT_EQ(out, in);
  cpu_backend().copy({view(out, {60}), view(out, {60})});  // in place: a no-op
  EXPECT_EQ(out, in);
}

TEST(CpuCopy, RejectsMismatchedDtypeOrCount) {
  std::vector<double> d(8);
  std::vector<float> f(8), g(9);
  EXPECT_THROW(cpu_backend().copy({view(f, {8}), view(d, {8})}), Error);
  EXPECT_THROW(cpu_backend().copy({view(g, {9}), view(f, {8})}), Error);
}

}  // namespace
}  // namespace gpt

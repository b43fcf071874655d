// The "did you mean" hint's edit distance is banded and capped (config/validate.cpp); it must pick exactly
// what the full optimal-string-alignment table picks.
#include "config/validate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace gpt::config_detail {
namespace {

// The whole (|a|+1) x (|b|+1) table, as closest_match computed it before the band.
size_t full_osa_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string full_table_closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(1, std::min<size_t>(3, (word.size() + 1) / 3));
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    const size_t d = full_osa_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best_d <= limit ? best : std::string();
}

TEST(ClosestMatch, AgreesWithTheFullTableOnRandomWords) {
  std::mt19937 rng(20);
  // A three-letter alphabet makes near misses, swaps and ties common.
  const auto word = [&](size_t max_len) {
    std::string w(std::uniform_int_distribution<size_t>(0, max_len)(rng), 'a');
    for (char& c : w) c = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 2)(rng));
    return w;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> candidates(std::uniform_int_distribution<size_t>(1, 6)(rng));
    for (auto& c : candidates) c = word(14);
    const std::string w = word(14);
    ASSERT_EQ(closest_match(w, candidates), full_table_closest_match(w, candidates)) << "word '" << w << "'";
  }
}

TEST(ClosestMatch, CountsASwapAsOneEditAndIgnoresCase) {
  EXPECT_EQ(closest_match("modle.n_layer", {"model.n_layer", "model.n_head"}), "model.n_layer");
  EXPECT_EQ(closest_match("MODEL.N_HEAD", {"model.n_layer", "model.n_head"}), "model.n_head");
  EXPECT_EQ(closest_match("optimizer", {"model.n_layer", "model.n_head"}), "");
}

}  // namespace
}  // namespace gpt::config_detail

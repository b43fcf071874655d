// The progress helper's arithmetic (rate, ETA, percentages) under an injected clock, its rate limit, and
// its silence off a terminal but for the summary.
#include "core/progress.h"

#include <gtest/gtest.h>

#include <sstream>

namespace gpt {
namespace {

struct FakeClock {
  double now = 100.0;
  Progress::Clock clock() {
    return [this] { return now; };
  }
};

TEST(Progress, RateAndEtaAreOverEverythingDoneSoFar) {
  FakeClock t;
  std::ostringstream out;
  Progress p("prepare", ProgressUnit::Bytes, 10'000'000, {.terminal = false, .clock = t.clock(), .out = &out});
  EXPECT_EQ(p.rate(), 0.0);
  EXPECT_FALSE(p.eta_s().has_value());
  t.now += 2.0;
  p.update(2'500'000);
  EXPECT_DOUBLE_EQ(p.rate(), 1'250'000.0);
  ASSERT_TRUE(p.eta_s().has_value());
  EXPECT_DOUBLE_EQ(*p.eta_s(), 6.0);  // 7.5 MB left at 1.25 MB/s
  EXPECT_EQ(p.status_line(), "prepare: 2.5 MB of 10 MB (25%), 1.25 MB/s, eta 6.0s");
  t.now += 8.0;
  p.add(5'000'000);
  EXPECT_DOUBLE_EQ(p.rate(), 750'000.0);
  EXPECT_DOUBLE_EQ(*p.eta_s(), 2'500'000.0 / 750'000.0);
  EXPECT_TRUE(out.str().empty()) << out.str();  // not a terminal: no status lines
  p.finish("1 document, 7.5M tokens, 2 shards");
  EXPECT_EQ(out.str(), "prepare: 1 document, 7.5M tokens, 2 shards in 10s (750 kB/s)\n");
}

TEST(Progress, UnknownTotalHasNoEtaAndCountsInUnits) {
  FakeClock t;
  std::ostringstream out;
  Progress p("export", ProgressUnit::Tokens, 0, {.terminal = false, .clock = t.clock(), .out = &out});
  t.now += 4.0;
  p.update(12'340'000);
  EXPECT_FALSE(p.eta_s().has_value());
  EXPECT_EQ(p.status_line(), "export: 12.3M tokens, 3.08M tokens/s");
}

TEST(Progress, OnATerminalAtMostOneLinePerInterval) {
  FakeClock t;
  std::ostringstream out;
  Progress p("prepare", ProgressUnit::Items, 100, {.interval_s = 1.0, .terminal = true, .clock = t.clock(), .out = &out});
  for (int i = 1; i <= 40; ++i) {
    t.now += 0.125;  // exact in binary; 5 s in all: 5 lines, not 40
    p.update(static_cast<uint64_t>(i));
  }
  const std::string shown = out.str();
  EXPECT_EQ(std::count(shown.begin(), shown.end(), '\r'), 5) << shown;
  EXPECT_EQ(shown.find("\rprepare: 7 of 100"), std::string::npos) << shown;
  EXPECT_NE(shown.find("\rprepare: 8 of 100 (8%), 8/s, eta 12s\x1b[K"), std::string::npos) << shown;
  EXPECT_NE(shown.find("\rprepare: 40 of 100 (40%), 8/s, eta 7.5s\x1b[K"), std::string::npos) << shown;
  p.finish("done");
  // The status line is cleared before the summary, which ends the output with a newline.
  EXPECT_TRUE(out.str().ends_with("\r\x1b[Kprepare: done in 5.0s (8/s)\n")) << out.str();
}

// An evaluation's progress ends without a summary: its result is the trainer's "val loss" line.
TEST(Progress, ClearEndsTheStatusLineAndWritesNothingElse) {
  FakeClock t;
  std::ostringstream terminal, pipe;
  Progress shown("evaluation", ProgressUnit::Tokens, 1000, {.terminal = true, .clock = t.clock(), .out = &terminal});
  Progress quiet("evaluation", ProgressUnit::Tokens, 1000, {.terminal = false, .clock = t.clock(), .out = &pipe});
  t.now += 2.0;
  shown.update(500);
  quiet.update(500);
  shown.clear();
  quiet.clear();
  EXPECT_EQ(terminal.str(), "\revaluation: 500 tokens of 1k tokens (50%), 250 tokens/s, eta 2.0s\x1b[K\r\x1b[K");
  EXPECT_TRUE(pipe.str().empty()) << pipe.str();
}

TEST(Progress, DurationsAndAmountsRead) {
  EXPECT_EQ(duration_text(0.42), "0.4s");
  EXPECT_EQ(duration_text(42.4), "42s");
  EXPECT_EQ(duration_text(187), "3m07s");
  EXPECT_EQ(duration_text(7500), "2h05m");
  EXPECT_EQ(amount_text(999, ProgressUnit::Bytes), "999 B");
  EXPECT_EQ(amount_text(1234567, ProgressUnit::Bytes), "1.23 MB");
  EXPECT_EQ(amount_text(4.2e9, ProgressUnit::Tokens), "4.2G tokens");
}

}  // namespace
}  // namespace gpt

// The progress line of long passes (core/progress.h): percent, amount, rate and time left, in
// bytes or in a counted unit, and what it says when the total is unknown.
#include <gtest/gtest.h>

#include "leanseq/core/progress.h"

using leanseq::Progress;

TEST(Progress, PercentRateAndTimeLeft) {
  Progress lines("encoding train", 3000000, "lines", false);
  EXPECT_EQ(lines.text(1350000, 30, ""), "encoding train: 45% (1350000 of 3000000 lines), 45000 lines/s, 37 s left");
  EXPECT_EQ(lines.text(300000, 10, "2 workers"),
            "encoding train: 10% (300000 of 3000000 lines), 30000 lines/s, 1 min 30 s left, 2 workers");
  EXPECT_EQ(lines.text(3000000, 60, ""), "encoding train: 100% (3000000 of 3000000 lines), 50000 lines/s");
  EXPECT_EQ(lines.text(0, 0, ""), "encoding train: 0% (0 of 3000000 lines)");
  Progress bytes("checking train", 800000000, "", false);
  EXPECT_EQ(bytes.text(200000000, 20, ""), "checking train: 25% (200.0 MB of 800.0 MB), 10.0 MB/s, 60 s left");
  EXPECT_EQ(bytes.text(8000000, 1, ""), "checking train: 1% (8.0 MB of 800.0 MB), 8.0 MB/s, 1 min 39 s left");
  EXPECT_EQ(bytes.text(80000000, 600, ""), "checking train: 10% (80.0 MB of 800.0 MB), 0.1 MB/s, 1.5 h left");
  Progress unknown("reading", 0, "lines", false);
  EXPECT_EQ(unknown.text(500, 5, ""), "reading: 500 lines, 100 lines/s");
}

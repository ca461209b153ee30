// Classification scores against hand-computed values.
#include <gtest/gtest.h>

#include "leanseq/eval/classification.h"

using namespace leanseq;

TEST(ClassifyScores, PerClassPrecisionRecallF1AndConfusion) {
  // gold:      a a a b b c
  // predicted: a a b b c c
  auto r = eval::score_predictions({0, 0, 0, 1, 1, 2}, {0, 0, 1, 1, 2, 2}, {"a", "b", "c"});
  EXPECT_EQ(r.correct, 4);
  EXPECT_DOUBLE_EQ(r.accuracy, 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(r.classes[0].precision, 1.0);
  EXPECT_DOUBLE_EQ(r.classes[0].recall, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.classes[1].precision, 0.5);
  EXPECT_DOUBLE_EQ(r.classes[1].recall, 0.5);
  EXPECT_DOUBLE_EQ(r.classes[2].precision, 0.5);
  EXPECT_DOUBLE_EQ(r.classes[2].recall, 1.0);
  EXPECT_NEAR(r.classes[0].f1, 0.8, 1e-12);
  EXPECT_NEAR(r.macro_f1, (0.8 + 0.5 + 2.0 / 3.0) / 3.0, 1e-12);
  EXPECT_EQ(r.classes[2].support, 1);
  EXPECT_EQ(r.confusion[0][1], 1);
  EXPECT_EQ(r.confusion[1][2], 1);
  EXPECT_NE(r.json().find("\"macro_f1\""), std::string::npos);
}

TEST(ClassifyScores, AClassNeverPredictedHasZeroPrecisionNotNaN) {
  auto r = eval::score_predictions({0, 1}, {0, 0}, {"x", "y"});
  EXPECT_EQ(r.classes[1].precision, 0.0);
  EXPECT_EQ(r.classes[1].f1, 0.0);
}

// The main job on the user's own parallel text: prepare, train, choose the length penalty on the
// validation set, translate and score the test set.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "task.h"

using namespace leanseq::test;

TEST(Quickstart, OwnTextIsPreparedTrainedTranslatedAndScoredWithAValidatedLengthPenalty) {
  const auto dir = temp_dir("quickstart");
  write_task_splits(dir);
  std::string out;
  const std::string qs = kCli + " quickstart --work " + dir + "/qs --src src --tgt tgt --train " + dir + "/train --valid " +
                         dir + "/valid --test " + dir + "/test --arch transformer_tiny --vocab-size 60 --samples 2";
  // A number of updates, not a wall-clock budget, so that the run is the same on any machine. After
  // 400 updates the validation BLEU is about 76, 1.5's a little above 1.0's and 2.0's (on the
  // 2-core Sapphire Rapids).
  ASSERT_EQ(run_command(qs + " --set stop.max_update=400 --set valid.interval_updates=100 --set optim.warmup_updates=30 " +
                            "--set optim.lr=0.005 2>&1",
                        out),
            0)
      << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(length penalty (\S+): the validation set's BLEU (\S+) at 1\.0, (\S+) at 1\.5, (\S+) at 2\.0)")))
      << out;
  const std::string chosen = m[1];
  const double at[3] = {std::stod(m[2]), std::stod(m[3]), std::stod(m[4])};
  const char* names[3] = {"1.0", "1.5", "2.0"};
  int best = 0;
  for (int i = 1; i < 3; ++i) {
    if (at[i] > at[best]) best = i;
  }
  EXPECT_EQ(chosen, names[best]) << out;
  char test_line[64];
  std::snprintf(test_line, sizeof test_line, "test set: 100 sentences, beam 5, length penalty %.2f:", std::stod(chosen));
  EXPECT_NE(out.find(test_line), std::string::npos) << out;
  // Each validation figure is translate's and score's with that penalty, and the test figure
  // score's on the written translations.
  const std::string ck = dir + "/qs/checkpoints/checkpoint_best.pt";
  for (int i = 0; i < 3; ++i) {
    std::string valid_bleu;
    ASSERT_EQ(run_command(kCli + " translate --checkpoint " + ck + " --beam 5 --max-len-a 1.2 --max-len-b 10 --lenpen " +
                              names[i] + " < " + dir + "/valid.src > " + dir + "/valid.hyp && " + kCli + " score -r " +
                              dir + "/valid.tgt --hyp " + dir + "/valid.hyp",
                          valid_bleu),
              0)
        << valid_bleu;
    char expected[32];
    std::snprintf(expected, sizeof expected, "BLEU = %.2f ", at[i]);
    EXPECT_EQ(valid_bleu.rfind(expected, 0), 0u) << names[i] << ": " << valid_bleu << " vs " << out;
  }
  std::string test_bleu;
  ASSERT_EQ(run_command(kCli + " score -r " + dir + "/test.tgt --hyp " + dir + "/qs/test.hyp.tgt", test_bleu), 0);
  EXPECT_NE(out.find(test_bleu.substr(0, test_bleu.find(' ', 7))), std::string::npos) << test_bleu << " vs " << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/qs/learning_curve.png"));
  EXPECT_NE(out.find("\nSRC: "), std::string::npos);
  EXPECT_GT(at[best], 50) << out;  // the task is learnt
}

TEST(Quickstart, AGivenLengthPenaltyIsUsedWithoutTheValidationChoice) {
  const auto dir = temp_dir("quickstart-lenpen");
  write_task_splits(dir);
  std::string out;
  ASSERT_EQ(run_command(kCli + " quickstart --work " + dir + "/qs --src src --tgt tgt --train " + dir + "/train --valid " + dir +
                            "/valid --test " + dir + "/test --arch transformer_tiny --vocab-size 60 --samples 0 --lenpen 1.25 " +
                            "--set stop.max_update=20 2>&1",
                        out),
            0)
      << out;
  EXPECT_EQ(out.find("the validation set's BLEU"), std::string::npos) << out;
  EXPECT_NE(out.find("test set: 100 sentences, beam 5, length penalty 1.25:"), std::string::npos) << out;
}

TEST(Quickstart, BadArgumentsAreUsageErrors) {
  const auto dir = temp_dir("quickstart-bad");
  std::string out;
  EXPECT_EQ(run_command(kCli + " quickstart --work " + dir + "/qs --train " + dir + "/train 2>&1", out), 2) << out;
  EXPECT_EQ(out, "leanseq: error: quickstart: --train needs --valid and --test too\n");
  EXPECT_EQ(run_command(kCli + " quickstart --work " + dir + "/qs --lenpen -1 2>&1", out), 2) << out;
  EXPECT_EQ(out, "leanseq: error: quickstart: --lenpen must be 0 (chosen on the validation set) or positive\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/qs"));
}

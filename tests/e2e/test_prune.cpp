// Targeted dropout in training, pruned checkpoints and the quality-against-sparsity analysis,
// through the CLI.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "e2e/task.h"

using namespace leanseq::test;

TEST(EndToEndPrune, TargetedDropoutTrainsAndPrunedCheckpointsTranslate) {
  auto dir = temp_dir("prune");
  auto data = prepare_task(dir);
  std::string out;
  int rc = run_command(kCli + " train --arch transformer_tiny --data " + data + " --save-dir " + dir +
                           "/td --max-update 40 --set td.type=weight --set td.gamma=0.5 --set td.alpha=0.5"
                           " --set td.ramp_updates=10 --set optim.lr=0.003 --log-format text",
                       out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("targeted dropout: weight, gamma 0.50, alpha 0.50"), std::string::npos) << out;

  rc = run_command(kCli + " prune --checkpoint " + dir + "/td/checkpoint_last.pt --method weight --sparsity 0.75 -o " + dir +
                       "/p75.pt",
                   out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("75.00% of the prunable weights are zero"), std::string::npos) << out;
  rc = run_command("echo 'a1 a2 a3' | " + kCli + " translate --checkpoint " + dir + "/p75.pt --greedy", out);
  EXPECT_EQ(rc, 0) << out;
  rc = run_command(kCli + " prune --checkpoint " + dir + "/td/checkpoint_last.pt --method unit --sparsity 0.25 -o " + dir +
                       "/u25.pt",
                   out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("25.00% of the prunable weights are zero"), std::string::npos) << out;

  rc = run_command(kCli + " analyze prune --checkpoint " + dir + "/td/checkpoint_last.pt --checkpoint " + dir +
                       "/p75.pt --label td --label 'pruned to 75%' --src " + dir + "/test.src --ref " + dir +
                       "/test.tgt --sparsities 0,50 --beam 2 -o " + dir + "/curve",
                   out);
  ASSERT_EQ(rc, 0) << out;
  auto report = nlohmann::json::parse(read_text(dir + "/curve/prune.json"));
  ASSERT_EQ(report["models"].size(), 2u);
  const auto& dense = report["models"][0]["points"];
  ASSERT_EQ(dense.size(), 2u);
  EXPECT_LT(dense[0]["zeros"].get<double>(), 0.01);  // the dense weights, not the eval-pruned ones
  EXPECT_NEAR(dense[1]["zeros"].get<double>(), 0.5, 1e-3);
  EXPECT_NEAR(report["models"][1]["points"][0]["zeros"].get<double>(), 0.75, 1e-3);  // already pruned
  EXPECT_GT(std::filesystem::file_size(dir + "/curve/prune.png"), 1000u);
}

TEST(EndToEndPrune, BadOptionsAreUsageErrors) {
  auto dir = temp_dir("prunebad");
  std::string out;
  int rc = run_command(kCli + " prune --checkpoint x.pt --sparsity 1.5 -o y.pt", out);
  EXPECT_EQ(rc, 2) << out;
  rc = run_command(kCli + " prune --checkpoint x.pt --sparsity 0.5 --method random -o y.pt", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--method: 'random'"), std::string::npos) << out;
  rc = run_command(kCli + " prune --checkpoint " + dir + "/none.pt --sparsity 0.5 -o " + dir + "/y.pt", out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(dir + "/none.pt: checkpoint not found"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/y.pt"));
  rc = run_command(kCli + " train --arch transformer_tiny --data " + dir + " --set td.type=targeted", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("td.type: 'targeted'"), std::string::npos) << out;
  rc = run_command(kCli + " analyze prune --checkpoint x.pt --src a --ref b --sparsities 0,abc -o " + dir, out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--sparsities: 'abc'"), std::string::npos) << out;
  rc = run_command(kCli + " analyze prune --checkpoint x.pt --checkpoint y.pt --label x --src a --ref b -o " + dir, out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--label: 1 labels for 2 checkpoints"), std::string::npos) << out;
  // A translation model is scored on --src and --ref.
  auto data = prepare_task(dir);
  rc = run_command(kCli + " train --arch transformer_tiny --data " + data + " --save-dir " + dir + "/ck --max-update 1", out);
  ASSERT_EQ(rc, 0) << out;
  rc = run_command(kCli + " analyze prune --checkpoint " + dir + "/ck/checkpoint_last.pt --tsv t.tsv -o " + dir + "/x", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--src/--ref: translation checkpoints are scored on source sentences"), std::string::npos) << out;
}

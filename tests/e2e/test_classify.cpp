// Text classification through the CLI: training on a synthetic sentiment task, prediction,
// scoring, resume, targeted dropout and the errors of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e/task.h"
#include "leanseq/checkpoint/classify_config.h"
#include "leanseq/checkpoint/file.h"
#include "leanseq/nn/targeted_dropout.h"
#include "leanseq/runtime/classifier.h"

using namespace leanseq::test;

namespace {
std::string train_cmd(const std::string& dir, const std::string& arch, const std::string& prefix) {
  return kCli + " train --task classify -a " + arch + " --set data.train=" + dir + "/" + prefix + "train.tsv" +
         " --set data.valid=" + dir + "/" + prefix + "valid.tsv --set model.embed_dim=16 --set model.hidden_dim=16" +
         " --set model.classifier_hidden=16 --set model.dropout=0.1 --set model.ffn_dim=32 --set optim.lr=0.005" +
         " --set batch.max_sentences=32 --threads 1";
}

// dir/{train,valid}.tsv of the sentiment task, and `arch` trained on them for 20 updates with
// targeted dropout (weight, gamma 0.5, alpha 0.5) into dir/ck; returns the training's output.
std::string train_with_targeted_dropout(const std::string& dir, const std::string& arch, uint32_t seed) {
  write_sentiment(dir + "/train.tsv", 300, seed);
  write_sentiment(dir + "/valid.tsv", 60, seed + 1);
  std::string out;
  const int rc = run_command(train_cmd(dir, arch, "") +
                                 " --set td.type=weight --set td.gamma=0.5 --set td.alpha=0.5 --max-update 20 --save-dir " +
                                 dir + "/ck",
                             out);
  EXPECT_EQ(rc, 0) << out;
  return out;
}
}  // namespace

TEST(EndToEndClassify, DisanLearnsSentimentAndClassifyScoresIt) {
  auto dir = temp_dir("cls");
  write_sentiment(dir + "/train.tsv", 600, 1);
  write_sentiment(dir + "/valid.tsv", 100, 2);
  write_sentiment(dir + "/test.tsv", 200, 3);
  std::string out;
  int rc = run_command(train_cmd(dir, "disan", "") + " --set data.test=" + dir + "/test.tsv --max-epoch 6 --save-dir " +
                           dir + "/ck",
                       out);
  ASSERT_EQ(rc, 0) << out;
  auto report = nlohmann::json::parse(read_text(dir + "/ck/test_report.json"));
  EXPECT_GT(report["accuracy"].get<double>(), 0.9) << out;
  EXPECT_EQ(report["classes"].size(), 2u);
  EXPECT_NE(out.find("test accuracy"), std::string::npos) << out;

  // classify: labels for unlabelled text, and scores for labelled input.
  std::ofstream(dir + "/new.txt") << "w1 great w2\nw3 awful\n";
  rc = run_command(kCli + " classify --checkpoint " + dir + "/ck/checkpoint_best.pt -i " + dir + "/new.txt --scores", out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.substr(0, 2), "1\t") << out;
  EXPECT_NE(out.find("\n0\t"), std::string::npos) << out;
  rc = run_command(kCli + " classify --checkpoint " + dir + "/ck/checkpoint_best.pt -i " + dir + "/test.tsv -o " + dir +
                       "/pred.txt --report " + dir + "/report.json",
                   out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("accuracy"), std::string::npos) << out;
  auto again = nlohmann::json::parse(read_text(dir + "/report.json"));
  EXPECT_DOUBLE_EQ(again["accuracy"].get<double>(), report["accuracy"].get<double>());
  const auto predictions = read_text(dir + "/pred.txt");
  EXPECT_EQ(std::count(predictions.begin(), predictions.end(), '\n'), 200);

  // Resume goes on from the last checkpoint.
  rc = run_command(train_cmd(dir, "disan", "") + " --max-epoch 7 --save-dir " + dir + "/ck --resume", out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_NE(out.find("valid: epoch 7"), std::string::npos) << out;

  // A classifier checkpoint is not a translation model, and the other way round.
  rc = run_command("echo hi | " + kCli + " translate --checkpoint " + dir + "/ck/checkpoint_best.pt", out);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("text classifier checkpoint"), std::string::npos) << out;
}

TEST(EndToEndClassify, PairsTrainWithTheTransformerAndLightConvEncoders) {
  auto dir = temp_dir("clspair");
  write_sentiment(dir + "/ptrain.tsv", 300, 4, true);
  write_sentiment(dir + "/pvalid.tsv", 60, 5, true);
  for (const std::string arch : {"transformer_classifier", "lightconv_classifier"}) {
    std::string out;
    int rc = run_command(train_cmd(dir, arch, "p") + " --max-update 20 --save-dir " + dir + "/" + arch, out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("valid: epoch"), std::string::npos) << out;
    std::ofstream(dir + "/pairs.txt") << "w1 good\tw2 fine\n";
    rc = run_command(kCli + " classify --checkpoint " + dir + "/" + arch + "/checkpoint_last.pt -i " + dir + "/pairs.txt", out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_TRUE(out == "same\n" || out == "different\n") << out;
  }
}

TEST(EndToEndClassify, TargetedDropoutTrainsAClassifierThatLoadsPruned) {
  auto dir = temp_dir("clstd");
  std::string out = train_with_targeted_dropout(dir, "lightconv_classifier", 6);
  EXPECT_NE(out.find("targeted dropout: weight, gamma 0.50, alpha 0.50; validation prunes"), std::string::npos) << out;
  // The checkpoint holds the dense weights; loading it prunes the targeted half of every unit.
  auto loaded = leanseq::runtime::load_classifier(dir + "/ck/checkpoint_last.pt");
  EXPECT_GE(leanseq::nn::prunable_sparsity(*loaded.model), 0.45);
  int rc = run_command(train_cmd(dir, "lightconv_classifier", "") + " --set td.type=sometimes --max-update 1 --save-dir " +
                       dir + "/bad",
                   out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("td.type"), std::string::npos) << out;
}

TEST(EndToEndClassify, PruneAndThePruningCurveTakeClassifiers) {
  auto dir = temp_dir("clsprune");
  train_with_targeted_dropout(dir, "transformer_classifier", 8);
  std::string out;
  int rc = run_command(kCli + " prune --checkpoint " + dir + "/ck/checkpoint_last.pt --method weight --sparsity 0.75 -o " +
                       dir + "/p75.pt",
                   out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("75.00% of the prunable weights are zero"), std::string::npos) << out;
  // The pruned copy loads at exactly the asked sparsity (3/4 of each 16- or 32-wide row; no
  // further pruning at gamma 0.5 on load), records it, and classifies.
  auto pruned = leanseq::runtime::load_classifier(dir + "/p75.pt");
  EXPECT_NEAR(leanseq::nn::prunable_sparsity(*pruned.model), 0.75, 1e-3);
  const auto recorded = leanseq::checkpoint::resolve_classify_config(leanseq::parse_yaml_text(
      leanseq::checkpoint::read_checkpoint(dir + "/p75.pt").config_yaml, "p75.pt"));
  EXPECT_EQ(recorded.pruned_method, "weight");
  EXPECT_DOUBLE_EQ(recorded.pruned_sparsity, 0.75);
  EXPECT_FALSE(recorded.td.eval_prune);
  rc = run_command(kCli + " classify --checkpoint " + dir + "/p75.pt -i " + dir + "/valid.tsv -o " + dir +
                       "/p75.labels --report " + dir + "/p75.json",
                   out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("accuracy"), std::string::npos) << out;
  const double p75_accuracy = 100 * nlohmann::json::parse(read_text(dir + "/p75.json"))["accuracy"].get<double>();

  rc = run_command(kCli + " analyze prune --checkpoint " + dir + "/ck/checkpoint_last.pt --checkpoint " + dir +
                       "/p75.pt --tsv " + dir + "/valid.tsv --sparsities 0,50,100 -o " + dir + "/curve",
                   out);
  ASSERT_EQ(rc, 0) << out;
  auto report = nlohmann::json::parse(read_text(dir + "/curve/prune.json"));
  ASSERT_EQ(report["models"].size(), 2u);
  const auto& dense = report["models"][0]["points"];
  ASSERT_EQ(dense.size(), 3u);
  EXPECT_LT(dense[0]["zeros"].get<double>(), 0.01);  // the dense weights, not the eval-pruned ones
  EXPECT_NEAR(dense[1]["zeros"].get<double>(), 0.5, 1e-3);
  EXPECT_NEAR(dense[2]["zeros"].get<double>(), 1.0, 1e-6);
  for (const auto& p : dense) EXPECT_TRUE(p.contains("macro_f1"));
  // With every prunable weight zero the classifier answers one label for every input: its
  // accuracy is the share of one of the two labels in the file.
  double positives = 0, rows = 0;
  {
    std::ifstream in(dir + "/valid.tsv");
    std::string line;
    std::getline(in, line);  // header
    for (; std::getline(in, line); ++rows) positives += line.substr(line.rfind('\t') + 1) == "1";
  }
  const double all_zero = dense[2]["accuracy"].get<double>(), share = 100 * positives / rows;
  EXPECT_TRUE(std::abs(all_zero - share) < 1e-6 || std::abs(all_zero - (100 - share)) < 1e-6)
      << all_zero << " against label shares " << share << " / " << 100 - share;
  // The pruned checkpoint's own 0% point is its 75% sparsity, scored as `classify` scores it.
  const auto& own = report["models"][1]["points"][0];
  EXPECT_NEAR(own["zeros"].get<double>(), 0.75, 1e-3);
  EXPECT_NEAR(own["accuracy"].get<double>(), p75_accuracy, 1e-6) << out;
  EXPECT_EQ(read_text(dir + "/curve/prune.csv").rfind("checkpoint,sparsity,zeros,accuracy,macro_f1\n", 0), 0u);
  EXPECT_GT(std::filesystem::file_size(dir + "/curve/prune.png"), 1000u);

  // A classifier needs --tsv; one with an unlabelled file or beside a translation model is refused.
  rc = run_command(kCli + " analyze prune --checkpoint " + dir + "/p75.pt --src a --ref b -o " + dir + "/x", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--tsv: text classifier checkpoints are scored on a labelled TSV"), std::string::npos) << out;
  std::ofstream(dir + "/unlabelled.tsv") << "good w1 w2\nw3 bad\n";
  rc = run_command(kCli + " analyze prune --checkpoint " + dir + "/p75.pt --tsv " + dir + "/unlabelled.tsv -o " + dir + "/x",
                   out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(dir + "/unlabelled.tsv: has no label column"), std::string::npos) << out;
  auto data = prepare_task(dir);
  rc = run_command(kCli + " train --arch transformer_tiny --data " + data + " --save-dir " + dir + "/mt --max-update 1", out);
  ASSERT_EQ(rc, 0) << out;
  rc = run_command(kCli + " analyze prune --checkpoint " + dir + "/p75.pt --checkpoint " + dir +
                       "/mt/checkpoint_last.pt --tsv " + dir + "/valid.tsv -o " + dir + "/x",
                   out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("is a translation model but " + dir + "/p75.pt is a text classifier; compare checkpoints of one kind"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x"));
}

// --patience stops a classifier as it stops a translation model (one engine): a learning rate too
// small to move a weight keeps the valid accuracy where it was, so the first validation (update 3)
// stays the best and training stops two validations later.
TEST(EndToEndClassify, PatienceStopsAClassifierThatNoLongerImproves) {
  auto dir = temp_dir("clspatience");
  write_sentiment(dir + "/train.tsv", 600, 21);
  write_sentiment(dir + "/valid.tsv", 60, 22);
  std::string out;
  const int rc = run_command(train_cmd(dir, "disan", "") + " --max-update 200 --patience 2 --set valid.interval_updates=3 "
                                 "--set optim.lr=1e-12 --set model.dropout=0 --log-format text --save-dir " + dir + "/ck",
                             out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("stopping: 2 validations without a better accuracy"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 9 updates"), std::string::npos) << out;
}

TEST(EndToEndClassify, BadInputGivesOneLineAndTheRightExitCode) {
  auto dir = temp_dir("clsbad");
  write_sentiment(dir + "/train.tsv", 50, 1);
  write_sentiment(dir + "/valid.tsv", 10, 2);
  std::string out;
  // Unknown key: exit 2 with a hint.
  int rc = run_command(train_cmd(dir, "disan", "") + " --max-update 1 --set model.hiden_dim=3 --save-dir " + dir + "/a", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("unknown key 'model.hiden_dim'; did you mean 'model.hidden_dim'?"), std::string::npos) << out;
  // A sequence arch for the classify task, and no stopping rule: exit 2.
  rc = run_command(train_cmd(dir, "transformer_small", "") + " --max-update 1 --save-dir " + dir + "/a", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("not a text classifier"), std::string::npos) << out;
  rc = run_command(train_cmd(dir, "disan", "") + " --save-dir " + dir + "/a", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("stop.max_epoch"), std::string::npos) << out;
  // A classifier arch for seq2seq training: exit 2.
  rc = run_command(kCli + " train -a disan --data " + dir, out);
  EXPECT_EQ(rc, 2) << out;
  // A valid file with another column count: exit 1 naming file:line; nothing written.
  std::ofstream(dir + "/bad.tsv") << "fine\t1\nbad\t0\tx\n";
  rc = run_command(kCli + " train --task classify -a disan --set data.train=" + dir + "/train.tsv --set data.valid=" + dir +
                       "/bad.tsv --max-update 1 --save-dir " + dir + "/b",
                   out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(dir + "/bad.tsv:2: expected 2"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/b/checkpoint_last.pt"));
  // An unseen label in the valid file: exit 1 naming it.
  std::ofstream(dir + "/lab.tsv") << "fine\t1\nbad\tneutral\n";
  rc = run_command(kCli + " train --task classify -a disan --set data.train=" + dir + "/train.tsv --set data.valid=" + dir +
                       "/lab.tsv --max-update 1 --save-dir " + dir + "/c",
                   out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(dir + "/lab.tsv:2: label 'neutral'"), std::string::npos) << out;
  // classify on a truncated checkpoint and --report without labels.
  std::ofstream(dir + "/bad.pt") << "PK\x03\x04garbage";
  rc = run_command("echo hi | " + kCli + " classify --checkpoint " + dir + "/bad.pt", out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(dir + "/bad.pt: cannot read checkpoint"), std::string::npos) << out;
  ASSERT_EQ(run_command(train_cmd(dir, "disan", "") + " --max-update 2 --save-dir " + dir + "/d", out), 0) << out;
  rc = run_command("echo w1 good | " + kCli + " classify --checkpoint " + dir + "/d/checkpoint_last.pt --report " + dir + "/r.json", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--report: <stdin> has no label column"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/r.json"));
}

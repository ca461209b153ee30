// Checkpoints written by leanseq before its training engine was rewritten (tests/fixtures/pre_engine,
// made by make.sh there with the binary of commit 2be0550) still decode and classify exactly as that
// binary did, and training resumes from them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "e2e/task.h"

using namespace leanseq::test;
namespace fs = std::filesystem;

namespace {
const std::string kOld = tests_path("fixtures/pre_engine");

// `leanseq <command> ... -o dir/out.txt` writes what the old binary wrote into old/expected.txt.
void expect_output_as_before(const std::string& command, const std::string& old, const std::string& dir,
                             const std::string& what) {
  std::string out;
  ASSERT_EQ(run_command(kCli + " " + command + " -o " + dir + "/out.txt", out), 0) << out;
  const auto expected = read_text(old + "/expected.txt");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(read_text(dir + "/out.txt"), expected) << what << " as the old binary wrote";
}

// `leanseq train <args> --save-dir dir/ck --resume` continues from a copy of old/checkpoint_last.pt
// (so that resuming never writes into the source tree) at `epoch_update` and stops after `updates`.
void expect_resumes(const std::string& args, const std::string& old, const std::string& dir,
                    const std::string& epoch_update, int updates) {
  const auto save = dir + "/ck";
  fs::create_directories(save);
  fs::copy_file(old + "/checkpoint_last.pt", save + "/checkpoint_last.pt");
  std::string out;
  ASSERT_EQ(run_command(kCli + " train " + args + " --seed 1 --threads 1 --max-update " + std::to_string(updates) +
                            " --save-dir " + save + " --resume",
                        out),
            0)
      << out;
  EXPECT_NE(out.find("resumed from " + save + "/checkpoint_last.pt at " + epoch_update), std::string::npos) << out;
  EXPECT_NE(out.find("done: " + std::to_string(updates) + " updates"), std::string::npos) << out;
}
}  // namespace

TEST(OldCheckpoints, ATranslationModelDecodesAsBeforeAndResumes) {
  const auto dir = temp_dir("old-seq2seq"), old = kOld + "/seq2seq";
  ASSERT_NO_FATAL_FAILURE(expect_output_as_before(
      "translate --checkpoint " + old + "/checkpoint_last.pt --beam 4 --nbest 2 --max-len-b 40 --threads 1" +
          " --output-format fairseq -i " + old + "/test.src",
      old, dir, "hypotheses, scores and positional scores"));
  expect_resumes("--arch transformer_tiny --data " + old + "/data --set batch.max_tokens=500 --set optim.lr=0.01" +
                     " --set checkpoint.no_epoch_checkpoints=true",
                 old, dir, "epoch 11, update 150", 160);
}

TEST(OldCheckpoints, AClassifierLabelsAsBeforeAndResumes) {
  const auto dir = temp_dir("old-classifier"), old = kOld + "/classifier";
  ASSERT_NO_FATAL_FAILURE(expect_output_as_before(
      "classify -m " + old + "/checkpoint_last.pt -i " + old + "/test.tsv --scores --threads 1", old, dir,
      "labels and scores"));
  expect_resumes("--task classify -a disan --set data.train=" + old + "/train.tsv --set data.valid=" + old +
                     "/valid.tsv --set model.embed_dim=16 --set model.hidden_dim=16 --set model.classifier_hidden=16" +
                     " --set model.dropout=0.1 --set optim.lr=0.005 --set batch.max_sentences=32",
                 old, dir, "epoch 2, update 15", 20);
}

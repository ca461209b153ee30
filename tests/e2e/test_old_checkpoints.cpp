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
const std::string kOld = (fs::path(__FILE__).parent_path().parent_path() / "fixtures" / "pre_engine").string();

// save_dir/checkpoint_last.pt: a copy of the old one, so that resuming never writes into the source tree.
std::string copy_for_resume(const std::string& checkpoint, const std::string& save_dir) {
  fs::create_directories(save_dir);
  fs::copy_file(checkpoint, save_dir + "/checkpoint_last.pt");
  return save_dir;
}
}  // namespace

TEST(OldCheckpoints, ATranslationModelDecodesAsBeforeAndResumes) {
  const auto dir = temp_dir("old-seq2seq"), old = kOld + "/seq2seq";
  std::string out;
  int rc = run_command(kCli + " translate --checkpoint " + old + "/checkpoint_last.pt --beam 4 --nbest 2 --max-len-b 40" +
                           " --threads 1 --output-format fairseq -i " + old + "/test.src -o " + dir + "/out.txt",
                       out);
  ASSERT_EQ(rc, 0) << out;
  const auto expected = read_text(old + "/expected.txt");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(read_text(dir + "/out.txt"), expected) << "hypotheses, scores and positional scores as the old binary wrote";

  const auto save = copy_for_resume(old + "/checkpoint_last.pt", dir + "/ck");
  rc = run_command(kCli + " train --arch transformer_tiny --data " + old + "/data --save-dir " + save +
                       " --resume --max-update 160 --seed 1 --threads 1 --set batch.max_tokens=500 --set optim.lr=0.01" +
                       " --set checkpoint.no_epoch_checkpoints=true",
                   out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resumed from " + save + "/checkpoint_last.pt at epoch 11, update 150"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 160 updates"), std::string::npos) << out;
}

TEST(OldCheckpoints, AClassifierLabelsAsBeforeAndResumes) {
  const auto dir = temp_dir("old-classifier"), old = kOld + "/classifier";
  std::string out;
  int rc = run_command(kCli + " classify -m " + old + "/checkpoint_last.pt -i " + old + "/test.tsv --scores --threads 1 -o " +
                           dir + "/out.txt",
                       out);
  ASSERT_EQ(rc, 0) << out;
  const auto expected = read_text(old + "/expected.txt");
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(read_text(dir + "/out.txt"), expected) << "labels and scores as the old binary wrote";

  const auto save = copy_for_resume(old + "/checkpoint_last.pt", dir + "/ck");
  rc = run_command(kCli + " train --task classify -a disan --set data.train=" + old + "/train.tsv --set data.valid=" + old +
                       "/valid.tsv --set model.embed_dim=16 --set model.hidden_dim=16 --set model.classifier_hidden=16" +
                       " --set model.dropout=0.1 --set optim.lr=0.005 --set batch.max_sentences=32 --threads 1" +
                       " --max-update 20 --seed 1 --save-dir " + save + " --resume",
                   out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resumed from " + save + "/checkpoint_last.pt at epoch 2, update 15"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 20 updates"), std::string::npos) << out;
}

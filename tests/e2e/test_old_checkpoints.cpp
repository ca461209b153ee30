// Checkpoints written by leanseq before its training engine was rewritten (tests/fixtures/pre_engine,
// made by make.sh there with the binary of commit 2be0550) still decode and classify exactly as that
// binary did (to float32's precision), and training resumes from them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/fairseq_lines.h"
#include "e2e/task.h"

using namespace leanseq::test;
namespace fs = std::filesystem;

namespace {
const std::string kOld = tests_path("fixtures/pre_engine");

// The numbers of a tab-separated field, each with the last decimal place it is printed to (a
// positional score has 4), or nothing for a field that is not all numbers.
std::vector<std::pair<double, double>> numbers(const std::string& field) {
  std::istringstream in(field);
  std::vector<std::pair<double, double>> values;
  for (std::string word; in >> word;) {
    char* end = nullptr;
    const double v = std::strtod(word.c_str(), &end);
    if (end == word.c_str() || *end != '\0') return {};
    const auto point = word.find('.');
    const auto decimals = point == std::string::npos ? 0 : static_cast<int>(word.size() - point - 1);
    values.emplace_back(v, std::pow(10.0, -decimals));
  }
  return values;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  return parts;
}

// `leanseq <command> ... -o dir/out.txt` writes what the old binary wrote into old/expected.txt: the
// same lines, words and labels, and the same numbers to float32's precision (1e-5, plus the last
// decimal place printed: a CPU with other vector instructions than the one that wrote the file
// rounds the sums of its products otherwise).
void expect_output_as_before(const std::string& command, const std::string& old, const std::string& dir,
                             const std::string& what) {
  std::string out;
  ASSERT_EQ(run_command(kCli + " " + command + " -o " + dir + "/out.txt", out), 0) << out;
  const auto expected = split(read_text(old + "/expected.txt"), '\n');
  const auto got = split(without_timing_lines(read_text(dir + "/out.txt")), '\n');
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(got.size(), expected.size()) << what << " as the old binary wrote";
  for (size_t i = 0; i < got.size(); ++i) {
    const auto want_fields = split(expected[i], '\t'), got_fields = split(got[i], '\t');
    ASSERT_EQ(got_fields.size(), want_fields.size()) << "line " << i + 1 << ": " << got[i];
    for (size_t f = 0; f < got_fields.size(); ++f) {
      const auto want_numbers = numbers(want_fields[f]), got_numbers = numbers(got_fields[f]);
      if (want_numbers.empty()) {
        EXPECT_EQ(got_fields[f], want_fields[f]) << what << ", line " << i + 1;
        continue;
      }
      ASSERT_EQ(got_numbers.size(), want_numbers.size()) << what << ", line " << i + 1 << ": " << got[i];
      for (size_t k = 0; k < got_numbers.size(); ++k)
        EXPECT_NEAR(got_numbers[k].first, want_numbers[k].first, 1e-5 + want_numbers[k].second)
            << what << ", line " << i + 1 << ": " << got[i];
    }
  }
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
      "classify --checkpoint " + old + "/checkpoint_last.pt -i " + old + "/test.tsv --scores --threads 1", old, dir,
      "labels and scores"));
  expect_resumes("--task classify -a disan --set data.train=" + old + "/train.tsv --set data.valid=" + old +
                     "/valid.tsv --set model.embed_dim=16 --set model.hidden_dim=16 --set model.classifier_hidden=16" +
                     " --set model.dropout=0.1 --set optim.lr=0.005 --set batch.max_sentences=32",
                 old, dir, "epoch 2, update 15", 20);
}

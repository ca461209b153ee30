// `leanseq shortlist` and `translate --shortlist` on the transformer fixture (../shared): the file
// it writes, a shortlist of the whole vocabulary changing no translation, a small one holding
// every translation to its subwords, and a bad file named with its line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "e2e/fairseq_lines.h"
#include "e2e/task.h"

using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;
using leanseq::test::temp_dir;
using leanseq::test::without_timing_lines;

TEST(ShortlistFixture, BuildsAShortlistAndTranslatesWithIt) {
  if (leanseq::test::shared_path("fixtures/fairseq-pt").empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  if (leanseq::test::shared_path("data/multi30k").empty()) LEANSEQ_MISSING_SHARED("data/multi30k");
  const std::string src = leanseq::test::shared_path("fixtures/fairseq-pt/transformer");
  const std::string m30k = leanseq::test::shared_path("data/multi30k");
  const auto dir = temp_dir("shortlist-e2e");
  const std::string model = leanseq::test::import_fairseq_fixture("transformer", dir);
  std::string log;
  ASSERT_EQ(run_command("head -3000 " + m30k + "/train.de > " + dir + "/train.de && head -3000 " + m30k + "/train.en > " +
                            dir + "/train.en && head -50 " + m30k + "/test2016.de > " + dir + "/test.de",
                        log),
            0);
  // Sides of different lengths are named, either way, and nothing is written.
  ASSERT_EQ(run_command("head -2999 " + dir + "/train.en > " + dir + "/short.en", log), 0);
  EXPECT_EQ(run_command(kCli + " shortlist --checkpoint " + model + " --src " + dir + "/train.de --tgt " + dir +
                            "/short.en --out " + dir + "/x.txt",
                        log),
            1);
  EXPECT_NE(log.find(dir + "/short.en: has 2999 lines, fewer than " + dir + "/train.de"), std::string::npos) << log;
  EXPECT_EQ(run_command(kCli + " shortlist --checkpoint " + model + " --src " + dir + "/short.en --tgt " + dir +
                            "/train.en --out " + dir + "/x.txt",
                        log),
            1);
  EXPECT_NE(log.find(dir + "/train.en: has more lines than " + dir + "/short.en (2999)"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.txt"));
  for (const char* method : {"ibm1", "cooccurrence"}) {
    ASSERT_EQ(run_command(kCli + " shortlist --checkpoint " + model + " --src " + dir + "/train.de --tgt " + dir +
                              "/train.en --out " + dir + "/" + method + ".txt --best 10 --frequent 30 --method " + method,
                          log),
              0)
        << log;
    EXPECT_NE(log.find("source subwords with up to 10 target subwords each, 30 always allowed, from 3000 sentence pairs"),
              std::string::npos)
        << log;
    std::istringstream lines(read_text(dir + "/" + method + ".txt"));
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    EXPECT_EQ(line[0], '\t');  // the always-allowed subwords first
    std::istringstream always(line);
    EXPECT_EQ(std::distance(std::istream_iterator<std::string>(always), std::istream_iterator<std::string>()), 30);
    int rules = 0;
    for (; std::getline(lines, line); ++rules) {
      const auto tab = line.find('\t');
      ASSERT_NE(tab, std::string::npos) << line;
      std::istringstream targets(line.substr(tab + 1));
      const auto n = std::distance(std::istream_iterator<std::string>(targets), std::istream_iterator<std::string>());
      EXPECT_TRUE(n >= 1 && n <= 10) << line;
    }
    EXPECT_GT(rules, 300) << method;
  }
  auto translate = [&](const std::string& flags, const std::string& out) {
    std::string l;
    EXPECT_EQ(run_command(kCli + " translate --checkpoint " + model + " -i " + dir + "/test.de -o " + dir + "/" + out +
                              " --output-format fairseq " + flags,
                          l),
              0)
        << l;
    return without_timing_lines(read_text(dir + "/" + out));
  };
  const auto full = translate("", "full.txt");
  translate("--shortlist " + dir + "/ibm1.txt", "ibm1.out");
  // The whole target vocabulary: the same lines.
  std::string all = "\t";
  std::istringstream dict(read_text(src + "/dict.en.txt"));
  for (std::string l; std::getline(dict, l);) all += l.substr(0, l.find(' ')) + " ";
  std::ofstream(dir + "/all.txt") << all << "\n";
  EXPECT_EQ(translate("--shortlist " + dir + "/all.txt", "all.out"), full);
  // Three subwords: nothing else in any H line.
  std::ofstream(dir + "/three.txt") << "\t▁A ▁man .\n";
  std::istringstream small(translate("--shortlist " + dir + "/three.txt", "three.out"));
  const std::set<std::string> allowed{"▁A", "▁man", ".", "<unk>"};
  int hyps = 0;
  for (std::string l; std::getline(small, l);) {
    if (l.rfind("H-", 0) != 0) continue;
    ++hyps;
    std::istringstream words(l.substr(l.find('\t', l.find('\t') + 1) + 1));
    for (std::string w; words >> w;) EXPECT_TRUE(allowed.count(w)) << l;
  }
  EXPECT_EQ(hyps, 50);
  std::ofstream(dir + "/bad.txt") << "\t▁A\n▁Mann ▁man\n";
  EXPECT_EQ(run_command(kCli + " translate --checkpoint " + model + " -i " + dir + "/test.de --shortlist " + dir +
                            "/bad.txt",
                        log),
            1);
  EXPECT_NE(log.find(dir + "/bad.txt:2: a shortlist line is source subwords, a tab and target subwords, got no tab"),
            std::string::npos)
      << log;
}

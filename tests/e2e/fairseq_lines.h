// fairseq-generate's and fairseq-interactive's H/D/P lines, read and compared with a tolerance on
// their scores, for the tests that check leanseq's lines against fairseq's own; and the fixture
// checkpoints of ../shared/fixtures/fairseq-pt imported to decode them.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/task.h"

namespace leanseq::test {

// `text` without fairseq-interactive's W (timing) lines, for comparing two runs' outputs.
inline std::string without_timing_lines(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("W-", 0) != 0) out += l + "\n";
  }
  return out;
}

// `fixture` (a folder of ../shared/fixtures/fairseq-pt) imported by `leanseq import-fairseq` as
// dir/<fixture>.pt, its path returned.
inline std::string import_fairseq_fixture(const std::string& fixture, const std::string& dir) {
  const std::string src = shared_path("fixtures/fairseq-pt/" + fixture);
  const std::string out = dir + "/" + fixture + ".pt";
  std::string log;
  const int rc = run_command(kCli + " import-fairseq --checkpoint " + src + "/model.pt --data-dir " + src + " --spm " +
                                 src + "/spm.model --source-lang de --target-lang en --out " + out,
                             log);
  EXPECT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("imported fairseq"), std::string::npos) << log;
  return out;
}

struct Hyp {
  double score = 0;
  std::string tokens, detok;
  std::vector<double> positional;
};

// id -> hypotheses in rank order, from fairseq's H/D/P lines.
inline std::map<int, std::vector<Hyp>> parse_fairseq_lines(const std::string& text) {
  std::map<int, std::vector<Hyp>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.size() < 3 || line[1] != '-' || (line[0] != 'H' && line[0] != 'D' && line[0] != 'P')) continue;
    const auto tab = line.find('\t');
    const int id = std::stoi(line.substr(2, tab - 2));
    auto& hyps = out[id];
    const std::string rest = line.substr(tab + 1);
    if (line[0] == 'H') {
      Hyp h;
      const auto t2 = rest.find('\t');
      h.score = std::stod(rest.substr(0, t2));
      h.tokens = t2 == std::string::npos ? "" : rest.substr(t2 + 1);
      hyps.push_back(h);
    } else if (line[0] == 'D') {
      const auto t2 = rest.find('\t');
      hyps.back().detok = t2 == std::string::npos ? "" : rest.substr(t2 + 1);
    } else {
      std::istringstream ps(rest);
      for (double v; ps >> v;) hyps.back().positional.push_back(v);
    }
  }
  return out;
}

// The hypotheses of `actual_text` against `expected_text` (fairseq's, 50 sentences): the same tokens
// (and detokenized text with `detok`), scores within 1e-4, per-token scores within 1.5e-4.
inline void compare_fairseq_lines(const std::string& what, const std::string& expected_text, const std::string& actual_text, bool detok) {
  const auto expected = parse_fairseq_lines(expected_text), actual = parse_fairseq_lines(actual_text);
  ASSERT_EQ(expected.size(), 50u) << what;
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const auto& [id, hyps] : expected) {
    const auto& got = actual.at(id);
    ASSERT_EQ(got.size(), hyps.size()) << what << " sentence " << id;
    for (size_t k = 0; k < hyps.size(); ++k) {
      EXPECT_EQ(got[k].tokens, hyps[k].tokens) << what << " sentence " << id << " hypothesis " << k;
      EXPECT_NEAR(got[k].score, hyps[k].score, 1e-4) << what << " sentence " << id << " hypothesis " << k;
      if (detok) {
        EXPECT_EQ(got[k].detok, hyps[k].detok) << what << " sentence " << id;
      }
      ASSERT_EQ(got[k].positional.size(), hyps[k].positional.size()) << what << " sentence " << id;
      for (size_t t = 0; t < hyps[k].positional.size(); ++t) {
        // Both printed with 4 decimals: one unit of the last one apart at most.
        EXPECT_NEAR(got[k].positional[t], hyps[k].positional[t], 1.5e-4) << what << " sentence " << id;
      }
    }
  }
}


}  // namespace leanseq::test

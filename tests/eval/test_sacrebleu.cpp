// Every numeric expectation of sacreBLEU 2.6.0's own tests (../shared/data/sacrebleu).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "leanseq/core/error.h"
#include "leanseq/eval/bleu.h"
#include "leanseq/eval/chrf.h"
#include "leanseq/eval/ter.h"
#include "leanseq/eval/tokenizers.h"
#include "support/fixtures.h"

using namespace leanseq::eval;
using json = nlohmann::json;

namespace {
bool load(const std::string& file, json& out) {
  std::string p = leanseq::test::shared_path("data/sacrebleu/" + file);
  if (p.empty()) return false;
  std::ifstream in(p);
  out = json::parse(in);
  return true;
}
#define LOAD_OR_SKIP(file, var) \
  json var;                     \
  if (!load(file, var)) LEANSEQ_MISSING_SHARED("data/sacrebleu/" << file);

std::vector<std::vector<std::string>> streams(const json& j) {
  return j.get<std::vector<std::vector<std::string>>>();
}
}  // namespace

TEST(SacreBleu, Tokenizers) {
  LOAD_OR_SKIP("tokenizer_cases.json", d);
  int n = 0;
  for (const auto& c : d["cases"]) {
    std::string in = c["in"];
    EXPECT_EQ(tokenize_13a(in), c["13a"].get<std::string>()) << "13a of: " << in;
    EXPECT_EQ(tokenize_intl(in), c["intl"].get<std::string>()) << "intl of: " << in;
    EXPECT_EQ(tokenize_char(in), c["char"].get<std::string>()) << "char of: " << in;
    ++n;
  }
  EXPECT_EQ(n, 20);
}

TEST(SacreBleu, CorpusBleu) {
  LOAD_OR_SKIP("cases.json", d);
  const auto& cb = d["corpus_bleu"];
  double tol = cb["tolerance"];
  for (const auto& c : cb["cases"]) {
    auto hyps = (c.contains("hyps") ? c["hyps"] : cb["hyps"]).get<std::vector<std::string>>();
    BleuOptions opt;
    const auto& kw = c["kwargs"];
    if (kw.contains("tokenize")) opt.tokenize = parse_tokenize(kw["tokenize"]);
    if (kw.contains("smooth_method")) opt.smooth = parse_smooth(kw["smooth_method"]);
    EXPECT_NEAR(corpus_bleu(hyps, streams(cb["refs"]), opt).score, c["score"].get<double>(), tol)
        << c.dump();
  }
  auto hyps = cb["hyps"].get<std::vector<std::string>>();
  for (auto it = cb["max_ngram_order"].begin(); it != cb["max_ngram_order"].end(); ++it) {
    BleuOptions opt;
    opt.max_order = std::stoi(it.key());
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", corpus_bleu(hyps, streams(cb["refs"]), opt).score);
    EXPECT_EQ(std::string(buf), it.value().get<std::string>()) << "max order " << it.key();
  }
}

TEST(SacreBleu, RawCorpusBleuFloor) {
  LOAD_OR_SKIP("cases.json", d);
  for (const auto& c : d["raw_corpus_bleu_(tokenize=none,smooth=floor)"]["cases"]) {
    BleuOptions opt;
    opt.tokenize = Tokenize::none;
    opt.smooth = Smooth::floor;
    opt.effective_order = true;
    opt.smooth_value = c.contains("smooth_value") ? c["smooth_value"].get<double>() : 0.01;
    auto hyps = c["hyps"].get<std::vector<std::string>>();
    auto s = corpus_bleu(hyps, streams(c["refs"]), opt);
    EXPECT_NEAR(s.score / 100, c["bleu_fraction"].get<double>(), 1e-8) << c.dump();
    if (c.contains("counts")) {
      auto counts = c["counts"].get<std::vector<double>>();
      auto totals = c["totals"].get<std::vector<double>>();
      EXPECT_EQ(s.stats.correct, counts);
      EXPECT_EQ(s.stats.total, totals);
      opt.smooth_value = -1;  // the default floor of 0.1
      EXPECT_NEAR(corpus_bleu(hyps, streams(c["refs"]), opt).score / 100,
                  c["with_default_floor_0.1"].get<double>(), 1e-8);
    }
  }
}

TEST(SacreBleu, BleuFromStats) {
  LOAD_OR_SKIP("cases.json", d);
  const auto& cs = d["compute_bleu_from_stats"];
  BleuStats st;
  st.correct = cs[0]["correct"].get<std::vector<double>>();
  st.total = cs[0]["total"].get<std::vector<double>>();
  st.sys_len = cs[0]["sys_len"];
  st.ref_len = cs[0]["ref_len"];
  EXPECT_NEAR(bleu_from_stats(st, {}).score / 100, cs[0]["bleu_fraction"].get<double>(), 1e-8);
  for (const auto& c : cs[1]["cases"]) {
    BleuStats z;
    z.correct = c[0].get<std::vector<double>>();
    z.total = c[1].get<std::vector<double>>();
    z.sys_len = c[2];
    z.ref_len = c[3];
    BleuOptions opt;
    opt.smooth = Smooth::floor;
    opt.smooth_value = c[4];
    EXPECT_EQ(bleu_from_stats(z, opt).score, 0.0) << c.dump();
  }
}

TEST(SacreBleu, SentenceBleu) {
  LOAD_OR_SKIP("cases.json", d);
  const auto& sb = d["sentence_bleu"];
  for (const auto& c : sb["cases"]) {
    BleuOptions opt;
    opt.smooth = parse_smooth(c[0]);
    opt.smooth_value = c[1].is_null() ? -1 : c[1].get<double>();
    opt.lowercase = c[2];
    opt.tokenize = parse_tokenize(c[3]);
    EXPECT_NEAR(sentence_bleu(sb["hyp"], {sb["ref"]}, opt).score, c[4].get<double>(), 1e-3)
        << c.dump();
  }
  for (const char* m : {"exp", "floor", "add-k", "none"}) {
    BleuOptions opt;
    opt.smooth = parse_smooth(m);
    EXPECT_EQ(sentence_bleu(sb["zero_case"]["hyp"], {sb["zero_case"]["ref"]}, opt).score, 0.0) << m;
  }
}

TEST(SacreBleu, Chrf) {
  LOAD_OR_SKIP("cases.json", d);
  const auto& cf = d["chrf"];
  auto corpus = [](const json& c, ChrfOptions opt) {
    auto hyps = c[0].get<std::vector<std::string>>();
    auto refs = c[1].get<std::vector<std::string>>();
    return corpus_chrf(hyps, {refs}, opt).score;
  };
  ChrfOptions eps;
  eps.beta = 3;
  eps.eps_smoothing = true;
  for (const auto& c : cf["eps_smoothing_true"]) EXPECT_NEAR(corpus(c, eps), c[2].get<double>(), 1e-4) << c.dump();
  ChrfOptions eff = eps;
  eff.eps_smoothing = false;
  for (const auto& c : cf["eps_smoothing_false_effective_order"])
    EXPECT_NEAR(corpus(c, eff), c[2].get<double>(), 1e-4) << c.dump();
  ChrfOptions ws = eps;
  ws.whitespace = true;
  for (const auto& c : cf["remove_whitespace_false"]) EXPECT_NEAR(corpus(c, ws), c[2].get<double>(), 1e-4) << c.dump();
  for (const auto& c : cf["sentence_chrf_eps_smoothing"]) {
    auto refs = c[1].get<std::vector<std::string>>();
    ChrfOptions sent = eps;
    sent.beta = 2;  // sentence_chrf is called with its default beta
    EXPECT_NEAR(sentence_chrf(c[0], refs, sent).score, c[2].get<double>(), 1e-4) << c.dump();
  }
}

TEST(SacreBleu, Ter) {
  LOAD_OR_SKIP("cases.json", d);
  int n = 0;
  for (const auto& c : d["ter"]["cases"]) {
    auto hyps = c[0].get<std::vector<std::string>>();
    auto refs = c[1].get<std::vector<std::string>>();
    EXPECT_NEAR(corpus_ter(hyps, {refs}).score, 100 * c[2].get<double>(), 1e-3) << c.dump();
    ++n;
  }
  EXPECT_EQ(n, 6);
}

TEST(Ter, ShiftsAreCountedAsOneEdit) {
  EXPECT_EQ(ter_edits({"d", "e", "f", "g", "h", "a", "b", "c"}, {"a", "b", "c", "d", "e", "f", "g", "h"}), 1.0);
  EXPECT_EQ(ter_edits({"a", "b"}, {"a", "c"}), 1.0);
  EXPECT_EQ(corpus_ter({"The Cat"}, {{"the cat"}}).score, 0.0);  // case-insensitive by default
}

TEST(Bleu, MismatchedStreamsAreAnError) {
  const std::vector<std::vector<std::string>> one_line{{"a"}};
  EXPECT_THROW(corpus_bleu({"a", "b"}, one_line), leanseq::DataError);
  EXPECT_THROW(corpus_chrf({"a", "b"}, one_line), leanseq::DataError);
  EXPECT_THROW(corpus_ter({"a", "b"}, one_line), leanseq::DataError);
}

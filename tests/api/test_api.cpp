// The stable C++ API (include/leanseq/): what a program linked to libleanseq.so sees.
#include <gtest/gtest.h>

#include <leanseq/leanseq.h>

#include "leanseq/core/io.h"
#include "leanseq/runtime/inference.h"
#include "support/fixtures.h"

namespace {

const std::string kModel = "fixtures/pre_engine/seq2seq/checkpoint_last.pt";
const std::string kInput = "fixtures/pre_engine/seq2seq/test.src";

// The message of a ConfigError `f` throws ("" when it throws none).
template <class F>
std::string config_error(F f) {
  try {
    f();
  } catch (const leanseq::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PublicApi, OptionsAreCheckedWhenSetWithTheMessagesOfEverySurface) {
  leanseq::TranslationOptions o;
  EXPECT_EQ(o.get("beam"), "5");
  EXPECT_EQ(config_error([&] { o.set("beam", 0); }), "beam: expected an integer in [1, 1024], got 0");
  EXPECT_EQ(config_error([&] { o.set("lenpen", std::nan("")); }),
            "lenpen: expected a finite number in [-1e+06, 1e+06], got nan");
  EXPECT_EQ(config_error([&] { o.set("lenpen", 2e6); }), "lenpen: expected a finite number in [-1e+06, 1e+06], got 2e+06");
  EXPECT_EQ(config_error([&] { o.set("max_len_b", -1); }), "max_len_b: expected an integer in [0, 65536], got -1");
  EXPECT_EQ(config_error([&] { o.set("beem", 4); }), "beem: not a decoding option (leanseq::Translator::options() lists them)");
  EXPECT_EQ(config_error([&] { o.set("beam", "four"); }), "beam: expected an integer in [1, 1024], got 'four'");  // text is read as a form field is
  EXPECT_EQ(o.get("beam"), "5");  // a refused value leaves the option as it was
  o.set("beam", 2).set("lenpen", 0.5).set("sampling", false);
  leanseq::TranslationOptions copy = o;
  o.set("beam", 3);
  EXPECT_EQ(copy.get("beam"), "2");
  EXPECT_EQ(copy.get("lenpen"), "0.5");
  const auto listed = leanseq::Translator::options();
  ASSERT_FALSE(listed.empty());
  EXPECT_EQ(listed.front().name, "beam");
  EXPECT_EQ(listed.front().default_value, "5");
}

TEST(PublicApi, TranslatesAsTheRuntimeDoesAndScores) {
  const auto lines = leanseq::io::read_lines(leanseq::test::tests_path(kInput));
  leanseq::Translator t(leanseq::test::tests_path(kModel));
  EXPECT_EQ(t.compute_type(), "float32");
  EXPECT_EQ(t.ensemble_size(), 1);
  leanseq::TranslationOptions o;
  o.set("nbest", 2).return_alignment(true);
  auto got = t.translate(lines, o);
  auto internal = leanseq::runtime::load_translator(leanseq::test::tests_path(kModel));
  leanseq::decode::TranslateOptions expected_options;
  expected_options.search.nbest = 2;
  expected_options.search.need_attn = true;
  const auto expected = internal.translator->translate(lines, expected_options);
  ASSERT_EQ(got.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    ASSERT_EQ(got[i].size(), 2u) << i;
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(got[i][k].text, expected[i][k].text) << i;
      EXPECT_EQ(got[i][k].tokens, expected[i][k].pieces) << i;
      EXPECT_DOUBLE_EQ(got[i][k].score, expected[i][k].hyp.score) << i;
      EXPECT_EQ(got[i][k].token_scores.size(), got[i][k].tokens.size() + 1) << i;
      EXPECT_EQ(got[i][k].alignment.size(), got[i][k].tokens.size()) << i;
    }
  }
  // An empty line has no translation; forced decoding gives the best hypothesis its own scores.
  EXPECT_TRUE(t.translate({""}).front().empty());
  const auto scores = t.score({lines[0]}, {got[0][0].text});
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0].size(), got[0][0].token_scores.size());
  EXPECT_THROW(leanseq::Translator("/nonexistent.pt"), leanseq::DataError);
  EXPECT_EQ(config_error([&] {
              leanseq::LoadOptions l;
              l.compute_type = "int7";
              leanseq::Translator(leanseq::test::tests_path(kModel), l);
            }).rfind("compute_type: ", 0),
            0u);
}

TEST(PublicApi, ScoresAsLeanseqScore) {
  const std::vector<std::string> hyps{"the cat sat on the mat", "a dog"};
  const std::vector<std::vector<std::string>> refs{{"the cat sat on the mat", "the dog"}};
  const auto bleu = leanseq::score_corpus(hyps, refs);
  EXPECT_EQ(bleu.metric, "bleu");
  EXPECT_EQ(bleu.text.rfind("BLEU = ", 0), 0u);
  EXPECT_NE(bleu.json.find("\"signature\""), std::string::npos);
  leanseq::ScoreOptions ter;
  ter.metric = "ter";
  EXPECT_NEAR(leanseq::score_corpus(hyps, refs, ter).score, 100.0 / 8, 1e-9);  // one substitution, 8 words
  ter.metric = "meteor";
  EXPECT_THROW(leanseq::score_corpus(hyps, refs, ter), leanseq::ConfigError);
  EXPECT_THROW(leanseq::score_corpus(hyps, {{"one line"}}), leanseq::DataError);
}

}  // namespace

// The Moses tokenizer/detokenizer and subword-nmt BPE (text/): sacremoses' and subword-nmt's own
// outputs on 300 Multi30k lines per language (../shared/fixtures/fairseq-pt/tokenizers), and the
// cases those lines do not reach: contractions, numbers, prefixes, glossaries, codes versions.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/text/bpe.h"
#include "leanseq/text/moses.h"
#include "leanseq/text/moses_bpe.h"
#include "leanseq/text/post_process.h"
#include "support/fixtures.h"

using namespace leanseq::text;

namespace {
std::vector<std::string> lines(const std::string& path) {
  std::istringstream in(leanseq::test::read_text(path));
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
}  // namespace

TEST(MosesFixture, TokenizerDetokenizerAndBpeReproduceSacremosesAndSubwordNmt) {
  const std::string dir = leanseq::test::shared_path("fixtures/fairseq-pt/tokenizers");
  if (dir.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt/tokenizers");
  const auto bpe = Bpe::from_file(dir + "/bpecodes");
  for (const std::string lang : {"en", "de"}) {
    const auto input = lines(dir + "/input." + lang), tok = lines(dir + "/" + lang + ".moses.tok"),
               noescape = lines(dir + "/" + lang + ".moses.noescape.tok"),
               detok = lines(dir + "/" + lang + ".moses.detok"), segmented = lines(dir + "/" + lang + ".bpe");
    ASSERT_EQ(input.size(), 300u);
    ASSERT_EQ(tok.size(), input.size());
    MosesOptions escaped, plain;
    escaped.lang = plain.lang = lang;
    plain.escape = false;
    MosesTokenizer t(escaped), t_plain(plain);
    MosesDetokenizer d(lang);
    for (size_t i = 0; i < input.size(); ++i) {
      EXPECT_EQ(t.tokenize(input[i]), tok[i]) << lang << " line " << i + 1;
      EXPECT_EQ(t_plain.tokenize(input[i]), noescape[i]) << lang << " line " << i + 1;
      EXPECT_EQ(d.detokenize(tok[i]), detok[i]) << lang << " line " << i + 1;
      EXPECT_EQ(bpe.apply_line(tok[i]), segmented[i]) << lang << " line " << i + 1;
      EXPECT_EQ(bpe.remove(segmented[i]), tok[i]) << lang << " line " << i + 1;
    }
  }
}

TEST(Moses, TheRulesTheCorpusDoesNotReach) {
  MosesOptions en;
  MosesTokenizer t(en);
  EXPECT_EQ(t.tokenize("He can't go, it's Mr. Smith's 5,300 $ car (really)..."),
            "He can &apos;t go , it &apos;s Mr. Smith &apos;s 5,300 $ car ( really ) ...");
  EXPECT_EQ(t.tokenize("Visit Acme Corp. today. See page No. 5 or No. Way."),
            "Visit Acme Corp. today . See page No. 5 or No . Way .");
  EXPECT_EQ(t.tokenize("a & b | <c> [d]"), "a &amp; b &#124; &lt; c &gt; &#91; d &#93;");
  en.aggressive_dash_splits = true;
  EXPECT_EQ(MosesTokenizer(en).tokenize("well-known e-mail"), "well @-@ known e @-@ mail");
  MosesDetokenizer d("en");
  EXPECT_EQ(d.detokenize("&quot; Hello , &quot; he said : &quot; it &apos;s $ 5 ( now ) . &quot;"),
            "\"Hello,\" he said: \"it's $5 (now).\"");
  EXPECT_EQ(d.detokenize("well @-@ known"), "well-known");
  MosesOptions fr;
  fr.lang = "fr";
  EXPECT_EQ(MosesTokenizer(fr).tokenize("l'homme"), "l&apos; homme");
  EXPECT_EQ(MosesDetokenizer("fr").detokenize("l&apos; homme"), "l'homme");
}

// Runs of dots, with sacremoses' outputs (its quirk included: a one-dot run right after another is
// not spaced from what follows), and long runs, which its loop took one pass per dot over.
TEST(Moses, RunsOfDotsAsSacremosesInOnePass) {
  const MosesTokenizer t{MosesOptions{}};
  EXPECT_EQ(t.tokenize("Wait... what?.. ok."), "Wait ... what ? .. ok .");
  EXPECT_EQ(t.tokenize("a.....b"), "a ..... b");
  EXPECT_EQ(t.tokenize("Mr. ...... 3.5..and"), "Mr. ...... 3.5 .. and");
  EXPECT_EQ(t.tokenize("DOTMULTI.DOTMULTI.a"), ".. ..a");
  EXPECT_EQ(t.tokenize("x..DOTMULTI..y"), "x .. . .. y");
  EXPECT_EQ(t.tokenize("He said 'DOTDOTMULTI' ..."), "He said &apos; .. &apos; ...");
  EXPECT_EQ(t.tokenize(std::string(5000, '.') + " a"), std::string(5000, '.') + " a");
  EXPECT_EQ(t.tokenize("b " + std::string(5000, '.')), "b " + std::string(5000, '.'));
}

// subword-nmt's apply_bpe as it is written: the earliest merge's pair, everywhere it occurs left
// to right (an overlapping occurrence skipped), one pass over the word per merge; the reference
// for Bpe's merging, which takes each pair once.
std::vector<std::string> subword_nmt_merges(std::vector<std::string> word,
                                            const std::vector<std::pair<std::string, std::string>>& codes) {
  while (word.size() > 1) {
    size_t best = codes.size();
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = std::find(codes.begin(), codes.end(), std::make_pair(word[i], word[i + 1]));
      best = std::min(best, static_cast<size_t>(it - codes.begin()));
    }
    if (best == codes.size()) break;
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size();) {
      const bool hit = i + 1 < word.size() && std::make_pair(word[i], word[i + 1]) == codes[best];
      merged.push_back(hit ? word[i] + word[i + 1] : word[i]);
      i += hit ? 2 : 1;
    }
    word = std::move(merged);
  }
  return word;
}

TEST(Bpe, MergesAsSubwordNmtsPassPerMergeOnRandomCodesAndWords) {
  std::mt19937 rng(7);
  for (int round = 0; round < 3000; ++round) {
    // Codes over a few letters, most merging symbols earlier codes made, some in any order.
    const int letters = 2 + static_cast<int>(rng() % 4);
    std::vector<std::string> symbols;
    for (int c = 0; c < letters; ++c) symbols.emplace_back(1, static_cast<char>('a' + c));
    std::vector<std::pair<std::string, std::string>> codes;
    std::string text = "#version: 0.2\n";
    for (int k = static_cast<int>(rng() % 14); k > 0; --k) {
      auto pair = std::make_pair(symbols[rng() % symbols.size()], symbols[rng() % symbols.size()]);
      if (rng() % 5 == 0) pair.second += "</w>";
      if (std::find(codes.begin(), codes.end(), pair) != codes.end()) continue;
      codes.push_back(pair);
      text += pair.first + " " + pair.second + "\n";
      if (rng() % 3 != 0 && pair.second.find("</w>") == std::string::npos) symbols.push_back(pair.first + pair.second);
    }
    std::string word;
    for (int i = 1 + static_cast<int>(rng() % 16); i > 0; --i) word += static_cast<char>('a' + rng() % letters);
    std::vector<std::string> chars;
    for (char c : word) chars.emplace_back(1, c);
    chars.back() += "</w>";
    auto expected = subword_nmt_merges(chars, codes);
    expected.back().resize(expected.back().size() - 4);  // "</w>"
    ASSERT_EQ(Bpe::from_text(text, "codes").encode_word(word), expected) << text << word;
  }
}

TEST(Bpe, MergesInOrderKeepsGlossariesAndReadsBothVersions) {
  const auto bpe = Bpe::from_text("#version: 0.2\nl o\nlo w</w>\ne r</w>\nn e\n", "codes", {"USA", "[0-9]+"});
  EXPECT_EQ(bpe.apply_line("low lower newer"), "low lo@@ w@@ er ne@@ w@@ er");
  // A glossary word is kept whole, inside a word it is cut out; spaces around the line stay.
  EXPECT_EQ(bpe.apply_line("  USA lowUSA 2026low \n"), "  USA low@@ USA 2026@@ low \n");
  EXPECT_EQ(bpe.remove("lo@@ w@@ er ne@@ w"), "lower new");
  // Version 0.1: the end of a word is a symbol of its own.
  const auto v01 = Bpe::from_text("l o\nlo w\nlow </w>\n", "codes");
  EXPECT_EQ(v01.apply_line("low lows"), "low low@@ s");
  try {
    Bpe::from_text("#version: 0.2\nl o\nthree parts here\n", "codes.txt");
    ADD_FAILURE() << "a malformed line was accepted";
  } catch (const leanseq::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("codes.txt:3:"), std::string::npos) << e.what();
  }
}

TEST(Bpe, FastBpeCodesSegmentAsFastBpeDoes) {
  // fastBPE's "a b count" lines: version 0.2's merges ("</w>" on a word's last character).
  const auto bpe = Bpe::from_text("l o 40\nlo w</w> 30\nn e 20\nne w</w> 10\n", "codes");
  EXPECT_TRUE(bpe.fastbpe());
  EXPECT_EQ(bpe.apply_line("low lows new newer"), "low lo@@ w@@ s new ne@@ w@@ e@@ r");
  EXPECT_FALSE(Bpe::from_text("#version: 0.2\nl o\n", "codes").fastbpe());
  for (const char* bad : {"l o 40\nlo w\n", "l o 40\nlo w x1\n", "l o 40\nlo  w 3\n"}) {
    try {
      Bpe::from_text(bad, "codes.fast");
      ADD_FAILURE() << "a malformed fastBPE line was accepted: " << bad;
    } catch (const leanseq::DataError& e) {
      EXPECT_NE(std::string(e.what()).find("codes.fast:2: a fastBPE merge"), std::string::npos) << e.what();
    }
  }
}

TEST(PostProcess, FairseqsSymbolsRemoveTheirMarks) {
  // As fairseq 0.12's data_utils.post_process.
  using leanseq::text::fairseq_post_process;
  EXPECT_EQ(fairseq_post_process("\xe2\x96\x81Hel lo \xe2\x96\x81world .", "sentencepiece"), "Hello world.");
  EXPECT_EQ(fairseq_post_process("_Hel lo _world", "wordpiece"), "Hello world");
  EXPECT_EQ(fairseq_post_process("h i | y o u |", "letter"), "hi you");
  EXPECT_EQ(fairseq_post_process("<SIL> a  <SIL> b <SIL>", "silence"), "a b");
  EXPECT_EQ(fairseq_post_process("hel lo_EOW world_EOW", "_EOW"), "hello world");
  EXPECT_EQ(fairseq_post_process("wor@@ ld is@@", "subword_nmt"), "world is");
  EXPECT_EQ(fairseq_post_process("wor@@ ld is@@", "@@ "), "world is");
  EXPECT_EQ(fairseq_post_process("wor@@ ld is@@", "@@"), "wor ld is");
  EXPECT_EQ(fairseq_post_process(" a  b ", "none"), " a  b ");
  EXPECT_THROW(fairseq_post_process("a", "bpe"), leanseq::ConfigError);
}

TEST(Moses, TokenizerSpecsAreFairseqsFlags) {
  using leanseq::text::parse_tokenizer_spec;
  EXPECT_EQ(parse_tokenizer_spec("moses", "t").text(), "moses");
  EXPECT_TRUE(parse_tokenizer_spec("moses", "t").dash_splits);  // fairseq's default
  EXPECT_EQ(parse_tokenizer_spec("moses no-escape  no-dash-splits", "t").text(), "moses no-dash-splits no-escape");
  EXPECT_FALSE(parse_tokenizer_spec("none", "t").moses);
  for (const char* bad : {"", "Moses", "moses no-escape no-escape", "none no-escape", "moses dash"}) {
    EXPECT_THROW(parse_tokenizer_spec(bad, "t"), leanseq::ConfigError) << bad;
  }
  // fairseq's --tokenizer moses splits hyphens inside words by default; the "none" pipeline takes
  // the tokens as they are.
  MosesBpePipeline split("en", parse_tokenizer_spec("moses", "t"), "", "t");
  EXPECT_EQ(split.encode("a well-known \"fact\""),
            (std::vector<std::string>{"a", "well", "@-@", "known", "&quot;", "fact", "&quot;"}));
  EXPECT_EQ(split.decode({"a", "well", "@-@", "known", "&quot;", "fact", "&quot;"}), "a well-known \"fact\"");
  MosesBpePipeline keep("en", parse_tokenizer_spec("moses no-dash-splits no-escape", "t"), "", "t");
  EXPECT_EQ(keep.encode("a well-known \"fact\""), (std::vector<std::string>{"a", "well-known", "\"", "fact", "\""}));
  MosesBpePipeline none("en", parse_tokenizer_spec("none", "t"), "", "t");
  EXPECT_EQ(none.encode(" a  well-known \"fact\" "), (std::vector<std::string>{"a", "well-known", "\"fact\""}));
  EXPECT_EQ(none.decode({"a", "well-known"}), "a well-known");
}

// sacremoses' own outputs (tests/fixtures/moses-sacremoses, made by its make.sh) with fairseq's
// settings: the nonbreaking prefixes of every language it ships a list for (ordinals, dates,
// abbreviations before names and numbers, initials), and CJK text as zh, ja, ko and en tokenize and
// detokenize it.
TEST(MosesFixture, NonbreakingPrefixesAndCjkAsSacremoses) {
  const std::string dir = leanseq::test::tests_path("fixtures/moses-sacremoses");
  auto check = [&](const std::string& lang, const std::string& input, const std::string& name) {
    MosesOptions o;
    o.lang = lang;
    o.aggressive_dash_splits = true;
    const MosesTokenizer tokenizer(o);
    const MosesDetokenizer detokenizer(lang);
    const auto in = lines(dir + "/" + input), tok = lines(dir + "/" + name + ".tok");
    ASSERT_EQ(in.size(), tok.size()) << name;
    for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(tokenizer.tokenize(in[i]), tok[i]) << name << " line " << i + 1;
    if (input != "input.cjk") return;
    const auto detok = lines(dir + "/" + name + ".detok");
    ASSERT_EQ(detok.size(), tok.size()) << name;
    for (size_t i = 0; i < tok.size(); ++i) EXPECT_EQ(detokenizer.detokenize(tok[i]), detok[i]) << name << " line " << i + 1;
  };
  for (const char* lang : {"cs", "de", "en", "es", "fr", "it", "pt", "ro", "ru"}) {
    check(lang, std::string("input.") + lang, lang);
  }
  for (const char* lang : {"zh", "ja", "ko", "en"}) check(lang, "input.cjk", std::string("cjk.") + lang);
}

TEST(MosesFixture, ThePipelineOfImportedModelsEncodesAndDecodesAsFairseq) {
  // What translate does with a model imported with --tokenizer moses --moses-no-dash-splits
  // --bpe-codes (the vectors' setting): raw text to BPE pieces (fairseq's encode_fn), pieces to
  // text (its decode_fn).
  const std::string dir = leanseq::test::shared_path("fixtures/fairseq-pt/tokenizers");
  if (dir.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt/tokenizers");
  const std::string codes = leanseq::test::read_text(dir + "/bpecodes");
  for (const std::string lang : {"en", "de"}) {
    MosesBpePipeline pipeline(lang, leanseq::text::parse_tokenizer_spec("moses no-dash-splits", "t"), codes, "bpecodes");
    const auto input = lines(dir + "/input." + lang), segmented = lines(dir + "/" + lang + ".bpe"),
               detok = lines(dir + "/" + lang + ".moses.detok");
    for (size_t i = 0; i < input.size(); ++i) {
      std::vector<std::string> pieces;
      std::istringstream words(segmented[i]);
      for (std::string w; words >> w;) pieces.push_back(w);
      EXPECT_EQ(pipeline.encode(input[i]), pieces) << lang << " line " << i + 1;
      EXPECT_EQ(pipeline.decode(pieces), detok[i]) << lang << " line " << i + 1;
    }
  }
}

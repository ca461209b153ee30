// Real fairseq 0.12.2 language models (tests/fixtures/fairseq-lm: a transformer_lm whose 512-wide
// embeddings feed a 64-wide decoder, and a lightconv_lm) evaluated and continued by leanseq's
// fairseq-eval-lm and fairseq-interactive --task language_modeling, against what fairseq printed.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "e2e/fairseq_lines.h"
#include "e2e/task.h"
#include "leanseq/checkpoint/file.h"
#include "leanseq/core/config.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/indexed.h"

using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;

namespace {

const char* kModels[] = {"transformer_lm", "lightconv_lm"};

std::string fixture() { return leanseq::test::tests_path("fixtures/fairseq-lm"); }

struct Evaluation {
  double loss = -1;
  std::string tokens;
  std::map<int, std::vector<std::pair<std::string, double>>> words;  // --output-word-probs, by block
};

// fairseq-eval-lm's lines (fairseq's own, after its log prefix, or leanseq's).
Evaluation parse_evaluation(const std::string& text) {
  Evaluation e;
  std::smatch m;
  std::istringstream in(text);
  const std::regex loss(R"(Loss \(base 2\): ([0-9.]+), Perplexity)"), tokens(R"(Evaluated ([0-9,]+) tokens)");
  const std::regex words(R"((?:^|\| )([0-9]+) (.*)$)"), word(R"(([^\t]+) \[(-?[0-9.]+)\])");
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, loss)) e.loss = std::stod(m[1]);
    if (std::regex_search(line, m, tokens)) e.tokens = m[1];
    if (line.find(" [") == std::string::npos || !std::regex_search(line, m, words)) continue;
    const std::string rest = m[2];
    auto& list = e.words[std::stoi(m[1])];
    for (std::sregex_iterator it(rest.begin(), rest.end(), word), end; it != end; ++it) {
      list.emplace_back((*it)[1], std::stod((*it)[2]));
    }
  }
  return e;
}

Evaluation eval_lm(const std::string& model, const std::string& flags) {
  std::string out;
  EXPECT_EQ(run_command(kCli + " fairseq-eval-lm " + fixture() + " --path " + fixture() + "/" + model +
                            "/model.pt --cpu --gen-subset test --tokens-per-sample 64 " + flags + " 2>/dev/null",
                        out),
            0)
      << out;
  return parse_evaluation(out);
}

}  // namespace

// Perplexity within 1e-3 relative of fairseq-eval-lm's (its loss is printed to 4 decimals) for every
// way fairseq cuts the split: blocks across sentences, a sentence per block, whole sentences per
// block, and blocks with 32 tokens of context; the same tokens counted.
TEST(FairseqLanguageModels, EvalLmGivesFairseqsPerplexityForEveryBlocking) {
  const std::pair<const char*, const char*> runs[] = {{"none", ""},
                                                      {"eos", "--sample-break-mode eos"},
                                                      {"complete", "--sample-break-mode complete"},
                                                      {"window", "--context-window 32"}};
  for (const char* model : kModels) {
    for (const auto& [name, flags] : runs) {
      const auto theirs = parse_evaluation(read_text(fixture() + "/" + model + "/eval." + name + ".txt"));
      const auto ours = eval_lm(model, flags);
      ASSERT_GT(theirs.loss, 0) << model << " " << name;
      EXPECT_NEAR(std::pow(2.0, ours.loss) / std::pow(2.0, theirs.loss), 1.0, 1e-3) << model << " " << name;
      EXPECT_EQ(ours.tokens, theirs.tokens) << model << " " << name;
    }
  }
}

TEST(FairseqLanguageModels, OutputWordProbsAsFairseqsLines) {
  for (const char* model : kModels) {
    const auto theirs = parse_evaluation(read_text(fixture() + "/" + model + "/eval.words.txt"));
    const auto ours = eval_lm(model, "--output-word-probs");
    ASSERT_EQ(theirs.words.size(), 14u) << model;
    ASSERT_EQ(ours.words.size(), theirs.words.size()) << model;
    for (const auto& [block, words] : theirs.words) {
      const auto& mine = ours.words.at(block);
      ASSERT_EQ(mine.size(), words.size()) << model << " block " << block;
      for (size_t i = 0; i < words.size(); ++i) {
        EXPECT_EQ(mine[i].first, words[i].first) << model << " block " << block << " word " << i;
        EXPECT_NEAR(mine[i].second, words[i].second, 1e-4) << model << " block " << block << " word " << i;
      }
    }
  }
}

// fairseq-interactive --task language_modeling continues each line (its pieces the prefix of every
// hypothesis): beam 4, the 2 best, their tokens equal and their scores within 1e-4.
TEST(FairseqLanguageModels, InteractiveContinuesEachLineAsFairseq) {
  for (const char* model : kModels) {
    std::string out;
    ASSERT_EQ(run_command(kCli + " fairseq-interactive " + fixture() + " --task language_modeling --path " + fixture() +
                              "/" + model + "/model.pt --cpu --beam 4 --nbest 2 --max-len-b 30 --input " + fixture() +
                              "/prefixes.txt 2>/dev/null",
                          out),
              0)
        << out;
    const auto theirs = leanseq::test::parse_fairseq_lines(read_text(fixture() + "/" + model + "/gen.beam4.txt"));
    const auto ours = leanseq::test::parse_fairseq_lines(out);
    ASSERT_EQ(theirs.size(), 8u) << model;
    ASSERT_EQ(ours.size(), theirs.size()) << model;
    for (const auto& [id, hyps] : theirs) {
      ASSERT_EQ(ours.at(id).size(), hyps.size()) << model << " line " << id;
      for (size_t k = 0; k < hyps.size(); ++k) {
        EXPECT_EQ(ours.at(id)[k].tokens, hyps[k].tokens) << model << " line " << id << " hypothesis " << k;
        EXPECT_NEAR(ours.at(id)[k].score, hyps[k].score, 1e-4) << model << " line " << id << " hypothesis " << k;
      }
    }
  }
}

// The same model imported once and given to leanseq translate continues the same lines to the same
// best text; an ensemble cannot mix it with a translation model.
TEST(FairseqLanguageModels, AnImportedLanguageModelContinuesLinesInTranslate) {
  const auto dir = leanseq::test::temp_dir("fairseq-lm");
  std::string out;
  ASSERT_EQ(run_command(kCli + " import-fairseq --checkpoint " + fixture() + "/transformer_lm/model.pt --data-dir " +
                            fixture() + " --tokenizer none --out " + dir + "/lm.pt",
                        out),
            0)
      << out;
  ASSERT_EQ(run_command(kCli + " translate --checkpoint " + dir + "/lm.pt --beam 4 --max-len-b 30 --input-format tokens -i " +
                            fixture() + "/prefixes.txt --output-format fairseq 2>/dev/null",
                        out),
            0)
      << out;
  const auto theirs = leanseq::test::parse_fairseq_lines(read_text(fixture() + "/transformer_lm/gen.beam4.txt"));
  const auto ours = leanseq::test::parse_fairseq_lines(out);
  ASSERT_EQ(ours.size(), theirs.size());
  for (const auto& [id, hyps] : theirs) EXPECT_EQ(ours.at(id).front().tokens, hyps.front().tokens) << "line " << id;
  const std::string widths = leanseq::test::tests_path("fixtures/fairseq-widths");
  ASSERT_EQ(run_command(kCli + " import-fairseq --checkpoint " + widths + "/model.pt --data-dir " + widths +
                            " --tokenizer none --out " + dir + "/mt.pt",
                        out),
            0)
      << out;
  EXPECT_EQ(run_command("echo x | " + kCli + " translate --checkpoint " + dir + "/lm.pt:" + dir + "/mt.pt 2>&1", out), 2);
  EXPECT_NE(out.find("an ensemble is of translation models or of language models, not both"), std::string::npos) << out;
}

TEST(FairseqLanguageModels, RefusalsNameTheirFlag) {
  const std::string lm = fixture() + "/lightconv_lm/model.pt";
  const std::string widths = leanseq::test::tests_path("fixtures/fairseq-widths");
  const std::pair<std::string, std::string> cases[] = {
      {" fairseq-eval-lm " + fixture() + " --path " + lm + " --sample-break-mode complete_doc",
       "--sample-break-mode: 'complete_doc' is not none, complete or eos"},
      {" fairseq-eval-lm " + fixture() + " --path " + lm + " --tokens-per-sample 64 --context-window 64",
       "--context-window 64 must be below --tokens-per-sample 64"},
      {" fairseq-eval-lm " + fixture() + " --path " + lm + " --post-process sentencepiece",
       "--post-process=sentencepiece: fairseq-eval-lm implements subword_nmt"},
      {" fairseq-eval-lm " + widths + " --path " + widths + "/model.pt --gen-subset test",
       "is a translation model, not a language model"},
      {" fairseq-interactive " + fixture() + " --path " + lm, "--task translation: " + lm + " is a language model"},
      {" fairseq-train " + leanseq::test::tests_path("fixtures/fairseq-data-bin") +
           " --task language_modeling --arch transformer_lm --optimizer adam --max-tokens 100",
       "holds translation pairs (--task translation)"},
  };
  for (const auto& [args, message] : cases) {
    std::string out;
    EXPECT_EQ(run_command("echo x | " + kCli + args + " 2>&1", out), 2) << args << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << args << "\n" << out;
  }
}

namespace {
// The text of a binarized split (its symbols, without </s>): what fairseq-preprocess read, and
// what its --dataset-impl raw copies.
void write_text_of(const std::string& prefix, const std::string& dict_path, const std::string& out) {
  const auto dict = leanseq::data::Dictionary::load(dict_path);
  leanseq::data::IndexedDataset split(prefix);
  std::ofstream text(out);
  for (size_t i = 0; i < split.size(); ++i) {
    auto ids = split.get(i);
    ids.pop_back();  // </s>
    std::string line;
    for (auto id : ids) line += (line.empty() ? "" : " ") + dict.symbol(id);
    text << line << "\n";
  }
}
}  // namespace

// fairseq-preprocess --only-source: the fixture's test split, written back as its text and
// binarized with its dictionary, is fairseq's very bytes (test.bin, test.idx, dict.txt); with -s en
// the files take fairseq's names for a missing target.
TEST(FairseqLanguageModels, PreprocessOnlySourceWritesFairseqsBytes) {
  const auto dir = leanseq::test::temp_dir("fairseq-lm-preprocess");
  write_text_of(fixture() + "/test", fixture() + "/dict.txt", dir + "/test.sp");
  std::string out;
  ASSERT_EQ(run_command(kCli + " fairseq-preprocess --only-source --srcdict " + fixture() + "/dict.txt --testpref " + dir +
                            "/test.sp --destdir " + dir + "/bin",
                        out),
            0)
      << out;
  for (const char* f : {"test.bin", "test.idx", "dict.txt"}) {
    EXPECT_EQ(read_text(dir + "/bin/" + f), read_text(fixture() + "/" + f)) << f;
  }
  std::filesystem::copy_file(dir + "/test.sp", dir + "/test.en");
  ASSERT_EQ(run_command(kCli + " fairseq-preprocess --only-source -s en --srcdict " + fixture() + "/dict.txt --testpref " +
                            dir + "/test --destdir " + dir + "/named",
                        out),
            0)
      << out;
  EXPECT_EQ(read_text(dir + "/named/test.en-None.en.bin"), read_text(fixture() + "/test.bin"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/named/dict.en.txt"));
  EXPECT_EQ(run_command(kCli + " fairseq-preprocess --only-source -t de --testpref x 2>&1", out), 2);
  EXPECT_NE(out.find("--only-source takes no --target-lang"), std::string::npos) << out;
}

namespace {
// The metrics of fairseq-validate's line ("loss 5.154 | nll_loss 4.124 | ppl 17.43 | ...").
std::map<std::string, double> validate_metrics(const std::string& text) {
  std::map<std::string, double> out;
  const std::regex metric(R"(\| ([a-z_]+) ([0-9.]+))");
  for (std::sregex_iterator it(text.begin(), text.end(), metric), end; it != end; ++it) {
    out[(*it)[1]] = std::stod((*it)[2]);
  }
  return out;
}
}  // namespace

// fairseq-validate's line for a translation model (its label-smoothed criterion: 0.1) and for both
// language models (their blocks as the checkpoint's task cut them): the same printed loss,
// nll_loss and ppl (to fairseq's rounding, one unit of the last digit of slack), wpb and bsz.
TEST(FairseqLanguageModels, ValidatePrintsFairseqsLossLine) {
  const std::string widths = leanseq::test::tests_path("fixtures/fairseq-widths");
  const std::pair<std::string, std::string> runs[] = {
      {widths + " --path " + widths + "/model.pt --valid-subset test", widths + "/validate.txt"},
      {fixture() + " --path " + fixture() + "/transformer_lm/model.pt --valid-subset test",
       fixture() + "/transformer_lm/validate.txt"},
      {fixture() + " --path " + fixture() + "/lightconv_lm/model.pt --valid-subset test --task language_modeling",
       fixture() + "/lightconv_lm/validate.txt"}};
  for (const auto& [args, expected] : runs) {
    std::string out;
    ASSERT_EQ(run_command(kCli + " fairseq-validate " + args + " --cpu --max-tokens 4000 2>/dev/null", out), 0) << out;
    const auto theirs = validate_metrics(read_text(expected)), ours = validate_metrics(out);
    ASSERT_GE(theirs.size(), 5u) << expected;
    for (const auto& [name, value] : theirs) {
      ASSERT_TRUE(ours.count(name)) << name << " missing: " << out;
      EXPECT_NEAR(ours.at(name), value, name == "ppl" ? 0.011 : name == "wps" ? 1e9 : 1.1e-3) << name << ": " << out;
    }
    EXPECT_EQ(ours.size(), theirs.size()) << out;
  }
  std::string out;
  EXPECT_EQ(run_command(kCli + " fairseq-validate " + widths + " --path " + widths +
                            "/model.pt --valid-subset test --task language_modeling 2>&1",
                        out),
            2);
  EXPECT_NE(out.find("is a translation model"), std::string::npos) << out;
}

// fairseq-train --task language_modeling on a fairseq-preprocess --only-source directory (the
// fixture's test split as train and valid), with the flags make.sh gave fairseq: fairseq's 64-token
// blocks (878 tokens: 14 blocks), and the model fairseq 0.12.2 built from that command line, key
// by key as the fixture's checkpoint imports (its 512-wide embeddings and post-norm included).
TEST(FairseqLanguageModels, FairseqTrainLanguageModelingBuildsFairseqsModelOnItsBlocks) {
  namespace fs = std::filesystem;
  const auto dir = leanseq::test::temp_dir("fairseq-lm-train");
  fs::create_directories(dir + "/bin");
  for (const char* split : {"train", "valid"}) {
    for (const char* ext : {".bin", ".idx"}) fs::copy_file(fixture() + "/test" + ext, dir + "/bin/" + split + ext);
  }
  fs::copy_file(fixture() + "/dict.txt", dir + "/bin/dict.txt");
  const std::pair<const char*, const char*> models[] = {
      {"transformer_lm",
       "--arch transformer_lm --decoder-embed-dim 64 --decoder-ffn-embed-dim 128 --decoder-layers 2 "
       "--decoder-attention-heads 4 --share-decoder-input-output-embed"},
      {"lightconv_lm",
       "--arch lightconv_lm --decoder-embed-dim 64 --decoder-ffn-embed-dim 128 --decoder-layers 2 "
       "--decoder-attention-heads 4 --decoder-kernel-size-list '[3, 5]'"}};
  for (const auto& [name, flags] : models) {
    std::string out;
    const std::string save = dir + "/" + name;
    ASSERT_EQ(run_command("cd " + dir + " && " + kCli + " fairseq-train bin --task language_modeling " + flags +
                              " --tokens-per-sample 64 --sample-break-mode none --optimizer adam --lr 0.003 "
                              "--max-tokens 2048 --max-update 2 --cpu --save-dir " + save,
                          out),
              0)
        << out;
    EXPECT_NE(out.find("bin/train: 40 sentences cut into 14 blocks of 64 tokens (none)"), std::string::npos) << out;
    ASSERT_EQ(run_command(kCli + " import-fairseq --checkpoint " + fixture() + "/" + name + "/model.pt --data-dir " +
                              fixture() + " --tokenizer none --out " + save + "/imported.pt",
                          out),
              0)
        << out;
    const auto keys = [](const std::string& path) {
      std::map<std::string, std::string> k;
      const auto ck = leanseq::checkpoint::read_checkpoint(path);
      for (const auto& [key, v] : leanseq::parse_yaml_text(ck.config_yaml, path).values) {
        if (key.rfind("model.", 0) == 0 && key.find("dropout") == std::string::npos) k[key] = v;
      }
      return k;
    };
    const auto ours = keys(save + "/checkpoint_last.pt"), theirs = keys(save + "/imported.pt");
    for (const auto& [k, v] : theirs) EXPECT_EQ(ours.count(k) ? ours.at(k) : "(missing)", v) << name << " " << k;
  }
}

// --dataset-impl raw (the text itself, encoded when read as fairseq's raw reader encodes it):
// fairseq-generate, fairseq-eval-lm and fairseq-validate print the same lines as on the binarized
// split; a raw line that is not UTF-8 is refused in one line naming the file and the line.
TEST(FairseqLanguageModels, RawDataBinsReadAsTheirBinaryForm) {
  namespace fs = std::filesystem;
  const auto dir = leanseq::test::temp_dir("fairseq-raw");
  const std::string widths = leanseq::test::tests_path("fixtures/fairseq-widths");
  fs::create_directories(dir + "/mt");
  fs::create_directories(dir + "/lm");
  for (const char* lang : {"de", "en"}) {
    fs::copy_file(widths + "/dict." + lang + ".txt", dir + "/mt/dict." + lang + ".txt");
    write_text_of(widths + "/test.de-en." + lang, widths + "/dict." + lang + ".txt", dir + "/mt/test.de-en." + lang);
  }
  fs::copy_file(fixture() + "/dict.txt", dir + "/lm/dict.txt");
  write_text_of(fixture() + "/test", fixture() + "/dict.txt", dir + "/lm/test");
  const std::string lm = " --path " + fixture() + "/transformer_lm/model.pt --cpu --tokens-per-sample 64";
  const std::pair<std::string, std::string> runs[] = {
      {" fairseq-generate " + widths + " --path " + widths + "/model.pt --cpu --gen-subset test --beam 5",
       " fairseq-generate " + dir + "/mt --path " + widths + "/model.pt --cpu --gen-subset test --beam 5"},
      {" fairseq-validate " + widths + " --path " + widths + "/model.pt --valid-subset test",
       " fairseq-validate " + dir + "/mt --path " + widths + "/model.pt --valid-subset test"},
      {" fairseq-eval-lm " + fixture() + lm + " --output-word-probs", " fairseq-eval-lm " + dir + "/lm" + lm + " --output-word-probs"}};
  for (const auto& [binary, raw] : runs) {
    std::string expected, out;
    ASSERT_EQ(run_command("{ " + kCli + binary + " 2>/dev/null; }", expected), 0) << expected;
    ASSERT_EQ(run_command("{ " + kCli + raw + " 2>/dev/null; }", out), 0) << out;
    const auto timeless = [](std::string text) {  // the lines without the speed in them
      return std::regex_replace(text, std::regex("(Evaluated [0-9,]+ tokens in )[^\n]*"), "$1");
    };
    EXPECT_EQ(timeless(out), timeless(expected)) << raw;
    EXPECT_GT(expected.size(), 80u) << binary;
  }
  // A raw split whose third line is not UTF-8: one error line naming the file and the line, exit 1.
  for (const auto& [path, command] : {std::pair{dir + "/mt/test.de-en.de", runs[0].second}, {dir + "/lm/test", runs[2].second}}) {
    std::string text = leanseq::test::read_text(path);
    const auto third = text.find('\n', text.find('\n') + 1) + 1;
    leanseq::test::write_text(path, text.insert(third, "\xff"));
    std::string out;
    EXPECT_EQ(run_command("{ " + kCli + command + " 2>&1 >/dev/null; }", out), 1) << out;  // its standard error
    const std::string line = "leanseq: error: " + path + ":3: invalid UTF-8 at byte 1 of the line (expected UTF-8 text)\n";
    EXPECT_NE(out.find(line), std::string::npos) << out;
    size_t errors = 0;
    for (auto at = out.find("error"); at != std::string::npos; at = out.find("error", at + 1)) ++errors;
    EXPECT_EQ(errors, 1u) << out;
  }
}

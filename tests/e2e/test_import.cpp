// Real fairseq 0.12.2 checkpoints (../shared/fixtures/fairseq-pt) imported with `leanseq
// import-fairseq` and decoded by `leanseq translate`: the H lines (tokens) of fairseq-generate at
// beam 5, beam 1 and n-best 3 with lenpen 1.2, their scores and per-token scores within 1e-4, and
// fairseq-interactive's D lines from raw text. Then the bad files: each one line and exit 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "e2e/fairseq_lines.h"
#include "e2e/task.h"
#include "leanseq/checkpoint/file.h"
#include "leanseq/core/config.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/indexed.h"

using leanseq::test::compare_fairseq_lines;
using leanseq::test::import_fairseq_fixture;
using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;
using leanseq::test::temp_dir;

namespace {

const char* kFixtures[] = {"transformer", "transformer_legacy", "lightconv_glu", "dynamicconv", "fconv"};


}  // namespace

TEST(ImportFairseqFixture, ReproducesFairseqGenerateAndInteractive) {
  if (leanseq::test::shared_path("fixtures/fairseq-pt").empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  const auto dir = temp_dir("import");
  for (const char* fixture : kFixtures) {
    const std::string src = leanseq::test::shared_path(std::string("fixtures/fairseq-pt/") + fixture);
    const std::string ck = import_fairseq_fixture(fixture, dir);
    const std::vector<std::pair<std::string, std::string>> runs = {
        {"gen.beam5.txt", "--beam 5"}, {"gen.beam1.txt", "--beam 1"}, {"gen.nbest3_lenpen1.2.txt", "--beam 5 --nbest 3 --lenpen 1.2"}};
    for (const auto& [file, flags] : runs) {
      std::string out;
      const int rc = run_command(kCli + " translate --checkpoint " + ck + " " + flags + " -i " + src +
                                     "/test.tok.de --input-format tokens --output-format fairseq 2>/dev/null",
                                 out);
      ASSERT_EQ(rc, 0) << out;
      compare_fairseq_lines(std::string(fixture) + " " + file, read_text(src + "/" + file), out, false);
    }
    std::string out;
    const int rc = run_command(kCli + " translate --checkpoint " + ck + " --beam 5 -i " + src +
                                   "/input.de --output-format fairseq 2>/dev/null",
                               out);
    ASSERT_EQ(rc, 0) << out;
    compare_fairseq_lines(std::string(fixture) + " interactive.beam5.txt", read_text(src + "/interactive.beam5.txt"), out, true);
  }
}

TEST(ImportFairseqFixture, AMosesAndBpeModelTranslatesRawTextThroughThatPipeline) {
  // The fconv checkpoint imported as if its data had been Moses-tokenized and BPE-segmented: the
  // checkpoint carries the codes, translate tokenizes and segments its input with them and joins
  // and detokenizes its output (the words are poor: the model was trained on SentencePiece).
  const std::string src = leanseq::test::shared_path("fixtures/fairseq-pt/fconv");
  const std::string tok = leanseq::test::shared_path("fixtures/fairseq-pt/tokenizers");
  if (src.empty() || tok.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  const auto dir = temp_dir("import-moses");
  std::string out;
  int rc = run_command(kCli + " import-fairseq --checkpoint " + src + "/model.pt --data-dir " + src +
                           " --tokenizer moses --bpe-codes " + tok + "/bpecodes --source-lang de --target-lang en --out " +
                           dir + "/m.pt",
                       out);
  ASSERT_EQ(rc, 0) << out;
  rc = run_command("echo 'Zwei junge Männer, im Freien.' | " + kCli + " translate --checkpoint " + dir +
                       "/m.pt --output-format fairseq 2>/dev/null",
                   out);
  ASSERT_EQ(rc, 0) << out;
  // The source went through Moses ("Männer ," split) and BPE (the codes' pieces, "@@" joins).
  EXPECT_NE(out.find("S-0\t"), std::string::npos) << out;
  EXPECT_NE(out.find(" , "), std::string::npos) << out;
  auto d = out.substr(out.find("D-0\t"));
  d = d.substr(d.find('\t', 4) + 1);
  d = d.substr(0, d.find('\n'));
  EXPECT_EQ(d.find("@@"), std::string::npos) << d;
  EXPECT_EQ(d.find(" ."), std::string::npos) << "detokenized: " << d;
  // --bpe-codes without --tokenizer, and both pipelines at once, are usage errors.
  EXPECT_EQ(run_command(kCli + " import-fairseq --checkpoint " + src + "/model.pt --data-dir " + src + " --bpe-codes " + tok +
                            "/bpecodes --out " + dir + "/x.pt",
                        out),
            2)
      << out;
}

// A fairseq transformer trained on Moses + fastBPE data (tests/fixtures/fairseq-fastbpe, made by its
// make.sh): fairseq-interactive --tokenizer moses --bpe fastbpe's lines, from raw text; import-fairseq
// takes the same codes; each BPE flag refuses the other tool's codes.
TEST(ImportFairseqFixture, AFastBpeModelTranslatesAsFairseqInteractive) {
  const std::string src = leanseq::test::tests_path("fixtures/fairseq-fastbpe");
  const std::string flags = src + " --path " + src + "/model.pt --cpu --beam 5 --source-lang de --target-lang en " +
                            "--tokenizer moses --bpe fastbpe --bpe-codes " + src + "/bpecodes";
  std::string out;
  ASSERT_EQ(run_command(kCli + " fairseq-interactive " + flags + " < " + src + "/input.de 2>/dev/null", out), 0) << out;
  compare_fairseq_lines("fastBPE fairseq-interactive", read_text(src + "/interactive.beam5.txt"), out, true);
  // --print-alignment: fairseq's hard alignments (each target token's most attended source token,
  // never the source's </s>).
  ASSERT_EQ(run_command(kCli + " fairseq-interactive " + flags + " --print-alignment < " + src +
                            "/input.de 2>/dev/null | grep '^A-'",
                        out),
            0);
  EXPECT_EQ(out, read_text(src + "/interactive.beam5.alignment.txt"));
  const auto dir = temp_dir("import-fastbpe");
  ASSERT_EQ(run_command(kCli + " import-fairseq --checkpoint " + src + "/model.pt --data-dir " + src +
                            " --tokenizer moses --bpe-codes " + src + "/bpecodes -s de -t en --out " + dir + "/m.pt",
                        out),
            0)
      << out;
  ASSERT_EQ(run_command(kCli + " translate --checkpoint " + dir + "/m.pt --beam 5 --output-format fairseq < " + src +
                            "/input.de 2>/dev/null",
                        out),
            0)
      << out;
  compare_fairseq_lines("fastBPE import-fairseq + translate", read_text(src + "/interactive.beam5.txt"), out, true);
  // fairseq's Moses splits "saftig-grünes" as "saftig @-@ grünes" (--moses-no-dash-splits: not).
  ASSERT_EQ(run_command("echo 'saftig-grünes Gras' | " + kCli + " fairseq-interactive " + flags +
                            " --moses-no-dash-splits 2>/dev/null",
                        out),
            0)
      << out;
  EXPECT_NE(out.find("S-0\tsa@@ f@@ ti@@ g@@ -@@ grü@@ n@@ es Gras\n"), std::string::npos) << out;
  const std::string subword_nmt = leanseq::test::shared_path("fixtures/fairseq-pt/tokenizers/bpecodes");
  if (subword_nmt.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt/tokenizers");
  EXPECT_EQ(run_command(kCli + " fairseq-interactive " + flags + " --bpe-codes " + subword_nmt + " < /dev/null", out), 2);
  EXPECT_NE(out.find("holds subword-nmt's codes, not fastBPE's"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " fairseq-interactive " + flags + " --bpe subword_nmt < /dev/null", out), 2);
  EXPECT_NE(out.find("holds fastBPE's codes"), std::string::npos) << out;
}

namespace {
// fairseq-generate on a fixture of tests/fixtures (made by its make.sh) with `flags` prints the
// tokens of each hypothesis fairseq printed in `expected_file` for its 30 sentences (every one of
// the n-best), their scores within 1e-4 and its BLEU line.
void expect_generate_as_fairseq(const std::string& src, const std::string& flags = "--beam 5",
                                const std::string& expected_file = "gen.beam5.txt") {
  std::string out;
  ASSERT_EQ(run_command(kCli + " fairseq-generate " + src + " --path " + src + "/model.pt --cpu --gen-subset test " +
                            "--batch-size 16 " + flags + " 2>/dev/null",
                        out),
            0)
      << out;
  const std::string expected = read_text(src + "/" + expected_file);
  const auto theirs = leanseq::test::parse_fairseq_lines(expected), ours = leanseq::test::parse_fairseq_lines(out);
  ASSERT_EQ(theirs.size(), 30u);
  ASSERT_EQ(ours.size(), theirs.size());
  for (const auto& [id, hyps] : theirs) {
    ASSERT_EQ(ours.at(id).size(), hyps.size()) << "sentence " << id;
    for (size_t k = 0; k < hyps.size(); ++k) {
      EXPECT_EQ(ours.at(id)[k].tokens, hyps[k].tokens) << "sentence " << id << " hypothesis " << k;
      EXPECT_NEAR(ours.at(id)[k].score, hyps[k].score, 1e-4) << "sentence " << id << " hypothesis " << k;
    }
  }
  const auto bleu = [](const std::string& text) { return text.substr(text.rfind("Generate test")); };
  EXPECT_EQ(bleu(out), bleu(expected));
}

// The model.* keys of a checkpoint's configuration (and its arch).
std::map<std::string, std::string> model_keys(const std::string& checkpoint) {
  const auto ck = leanseq::checkpoint::read_checkpoint(checkpoint);
  std::map<std::string, std::string> keys;
  for (const auto& [k, v] : leanseq::parse_yaml_text(ck.config_yaml, checkpoint).values) {
    if (k.rfind("model.", 0) == 0 || k == "arch") keys[k] = v;
  }
  return keys;
}
}  // namespace

// A fairseq transformer with --layernorm-embedding and --decoder-output-dim 32
// (tests/fixtures/fairseq-options).
TEST(ImportFairseqFixture, LayernormEmbeddingAndDecoderOutputDimDecodeAsFairseq) {
  expect_generate_as_fairseq(leanseq::test::tests_path("fixtures/fairseq-options"));
}

// A pre-norm fairseq transformer with --encoder-embed-dim 64 --decoder-embed-dim 96
// --decoder-output-dim 64 (tests/fixtures/fairseq-widths) decodes as fairseq-generate did, and
// fairseq-train's command line that made it (train_flags.txt) trains that model here: the imported
// checkpoint's configuration, key by key, without optimizer state (--no-save-optimizer-state).
TEST(ImportFairseqFixture, EncoderAndDecoderOfDifferentWidthsDecodeAsFairseqAndTrainFromItsCommandLine) {
  const std::string src = leanseq::test::tests_path("fixtures/fairseq-widths");
  expect_generate_as_fairseq(src);
  const auto dir = temp_dir("fairseq-widths");
  std::string flags = " " + read_text(src + "/train_flags.txt");  // as fairseq-train ran them, shell-quoted
  flags.erase(flags.find_last_not_of('\n') + 1);
  ASSERT_NE(flags.find("--decoder-embed-dim 96"), std::string::npos) << flags;
  std::string out;
  ASSERT_EQ(run_command("cd " + dir + " && " + kCli + " fairseq-train " + leanseq::test::tests_path("fixtures/fairseq-data-bin") +
                            flags + " --max-update 2",
                        out),
            0)
      << out;
  ASSERT_EQ(run_command(kCli + " import-fairseq --checkpoint " + src + "/model.pt --data-dir " + src +
                            " --tokenizer none --out " + dir + "/imported.pt",
                        out),
            0)
      << out;
  const auto ours = model_keys(dir + "/ckpt/checkpoint_last.pt"), theirs = model_keys(dir + "/imported.pt");
  EXPECT_EQ(theirs.at("model.encoder.embed_dim"), "64");
  EXPECT_EQ(theirs.at("model.decoder.embed_dim"), "96");
  for (const auto& [k, v] : theirs) EXPECT_EQ(ours.count(k) ? ours.at(k) : "(missing)", v) << k;
  EXPECT_FALSE(leanseq::checkpoint::read_checkpoint(dir + "/ckpt/checkpoint_last.pt").optimizer.has_value());
}

// fairseq-generate's diverse beam search (--diverse-beam-groups, --diverse-beam-strength) and
// diverse siblings (--diversity-rate) on the widths fixture: every hypothesis of the n-best as
// fairseq's, at 2 groups of 2, 3 groups of 2, and a rate of 0.5.
TEST(ImportFairseqFixture, DiverseBeamSearchAsFairseqGenerate) {
  const std::string src = leanseq::test::tests_path("fixtures/fairseq-widths");
  expect_generate_as_fairseq(src, "--beam 4 --diverse-beam-groups 2 --nbest 4", "gen.diverse2.txt");
  expect_generate_as_fairseq(src, "--beam 6 --diverse-beam-groups 3 --diverse-beam-strength 1.5 --nbest 3",
                             "gen.diverse3.txt");
  expect_generate_as_fairseq(src, "--beam 4 --diversity-rate 0.5 --nbest 4", "gen.siblings.txt");
  std::string out;
  EXPECT_EQ(run_command(kCli + " fairseq-generate " + src + " --path " + src + "/model.pt --gen-subset test --beam 5 " +
                            "--diverse-beam-groups 2 2>&1",
                        out),
            2);
  EXPECT_NE(out.find("diverse_beam_groups: expected a divisor of beam (5), got 2"), std::string::npos) << out;
}

TEST(ImportFairseqFixture, AnEnsembleOfAModelWithItselfIsTheModel) {
  const std::string fconv = leanseq::test::shared_path("fixtures/fairseq-pt/fconv");
  const std::string tok = leanseq::test::shared_path("fixtures/fairseq-pt/tokenizers");
  if (fconv.empty() || tok.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  const auto dir = temp_dir("ensemble");
  const std::string a = import_fairseq_fixture("fconv", dir), b = import_fairseq_fixture("transformer", dir);
  auto run = [&](const std::string& checkpoints, std::string& out) {
    return run_command("{ " + kCli + " translate --checkpoint " + checkpoints + " --beam 5 --nbest 2 -i " + fconv +
                           "/test.tok.de --input-format tokens --output-format fairseq 2>/dev/null; }",
                       out);
  };
  std::string alone, twice, mixed;
  ASSERT_EQ(run(a, alone), 0) << alone;
  ASSERT_EQ(run(a + ":" + a, twice), 0) << twice;
  EXPECT_EQ(leanseq::test::without_timing_lines(twice), leanseq::test::without_timing_lines(alone));  // the same tokens and printed scores
  // Two models with one dictionary decode together, and differently from either alone.
  ASSERT_EQ(run(a + ":" + b, mixed), 0) << mixed;
  EXPECT_NE(mixed, alone);
  // The same weights with another text pipeline are refused by name.
  std::string out;
  ASSERT_EQ(run_command(kCli + " import-fairseq --checkpoint " + fconv + "/model.pt --data-dir " + fconv +
                            " --tokenizer moses --bpe-codes " + tok + "/bpecodes --source-lang de --target-lang en --out " +
                            dir + "/moses.pt",
                        out),
            0)
      << out;
  EXPECT_EQ(run_command("echo Hallo | " + kCli + " translate --checkpoint " + a + ":" + dir + "/moses.pt", out), 1) << out;
  EXPECT_NE(out.find(dir + "/moses.pt: its text pipeline differs from " + a + "'s"), std::string::npos) << out;
}

TEST(ImportFairseqFixture, BadFilesGiveOneLineNamingTheFile) {
  const std::string src = leanseq::test::shared_path("fixtures/fairseq-pt/transformer_legacy");
  if (src.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt/transformer_legacy");
  const auto dir = temp_dir("import-bad");
  const std::string model = read_text(src + "/model.pt");
  auto run_import = [&](const std::string& file, const std::string& data_dir, std::string& out) {
    return run_command(kCli + " import-fairseq --checkpoint " + file + " --data-dir " + data_dir + " --spm " + src +
                           "/spm.model --source-lang de --target-lang en --out " + dir + "/out.pt",
                       out);
  };
  auto expect_error = [&](const std::string& name, const std::string& bytes, const std::string& message) {
    const std::string file = dir + "/" + name;
    std::ofstream(file, std::ios::binary) << bytes;
    std::string out;
    EXPECT_EQ(run_import(file, src, out), 1) << name << ": " << out;
    EXPECT_NE(out.find(file + ": "), std::string::npos) << name << ": " << out;
    EXPECT_NE(out.find(message), std::string::npos) << name << ": " << out;
    EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line: " << out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/out.pt")) << name;
  };
  expect_error("truncated.pt", model.substr(0, model.size() / 2), "truncated");
  expect_error("text.pt", "this is not a checkpoint\n", "neither a zip archive nor torch's legacy format");
  // The legacy header, then a pickle that would call os.system: refused, nothing run.
  const std::string header = model.substr(0, 137);  // magic, protocol and system information
  expect_error("foreign.pt", header + std::string("\x80\x02" "cos\nsystem\nq\x00X\x05\x00\x00\x00touchq\x01\x85R.", 30),
               "refuses the pickled reference to 'os.system'");
  // The same model under an arch name leanseq does not know.
  std::string renamed = model;
  const std::string arch = std::string("X\x0b\x00\x00\x00", 5) + "transformer";
  for (size_t at = renamed.find(arch); at != std::string::npos; at = renamed.find(arch, at + 1)) {
    renamed.replace(at + 5, 11, "transformXr");
  }
  expect_error("arch.pt", renamed, "fairseq arch 'transformXr' is not supported");
  // A data directory without the dictionaries.
  std::filesystem::create_directories(dir + "/empty");
  std::string out;
  EXPECT_EQ(run_import(src + "/model.pt", dir + "/empty", out), 1) << out;
  EXPECT_NE(out.find(dir + "/empty/dict.de.txt: source dictionary not found"), std::string::npos) << out;
}

TEST(ImportFairseqFixture, TranslateNamesTheImportForAFairseqFile) {
  const std::string src = leanseq::test::shared_path("fixtures/fairseq-pt/fconv");
  if (src.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt/fconv");
  std::string out;
  const int rc = run_command("echo Hallo | " + kCli + " translate --checkpoint " + src + "/model.pt", out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(src + "/model.pt is a fairseq checkpoint: import it first with 'leanseq import-fairseq --checkpoint " +
                     src + "/model.pt --data-dir "),
            std::string::npos)
      << out;
}

// fairseq-interactive's own command line, run by leanseq (and through a link of that name): the
// checkpoint imported on the fly gives fairseq-interactive's S/H/D/P lines for every fixture; a
// missing text pipeline and a fairseq flag leanseq does not take are refused by name.
TEST(ImportFairseqFixture, FairseqInteractiveCommandLineGivesFairseqsLines) {
  if (leanseq::test::shared_path("fixtures/fairseq-pt").empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  const auto dir = temp_dir("fairseq-interactive");
  std::filesystem::create_symlink(kCli, dir + "/fairseq-interactive");
  // The imported checkpoints go to a private directory under $TMPDIR, removed at the end, and those
  // that killed runs left are removed too: one of a process that has ended is there beforehand.
  std::string dead_pid;
  ASSERT_EQ(run_command("sh -c 'echo $$'", dead_pid), 0);
  dead_pid.erase(dead_pid.find_last_not_of("\n") + 1);
  const std::string tmpdir = dir + "/tmp", stale = tmpdir + "/leanseq-fairseq-" + dead_pid + "-abcdef";
  std::filesystem::create_directories(stale);
  std::ofstream(stale + "/0.pt") << "left by a killed run";
  for (const char* fixture : kFixtures) {
    const std::string src = leanseq::test::shared_path(std::string("fixtures/fairseq-pt/") + fixture);
    const std::string flags = src + " --path " + src + "/model.pt --cpu --beam 5 --buffer-size 16 --batch-size 16 " +
                              "--source-lang de --target-lang en --bpe sentencepiece --sentencepiece-model " + src +
                              "/spm.model < " + src + "/input.de 2>/dev/null";
    std::string out;
    ASSERT_EQ(run_command("TMPDIR=" + tmpdir + " " + kCli + " fairseq-interactive " + flags, out), 0) << out;
    compare_fairseq_lines(std::string(fixture) + " fairseq-interactive", read_text(src + "/interactive.beam5.txt"), out, true);
    EXPECT_TRUE(std::filesystem::is_empty(tmpdir)) << fixture;
    if (std::string(fixture) == "transformer") {
      std::string linked;
      ASSERT_EQ(run_command(dir + "/fairseq-interactive " + flags, linked), 0) << linked;
      auto lines = [](const std::string& text) {  // S/H/D/P lines only (the log's timings differ)
        std::istringstream in(text);
        std::string kept;
        for (std::string l; std::getline(in, l);) {
          if (l.size() > 2 && std::string("SHDP").find(l[0]) != std::string::npos && l[1] == '-') kept += l + "\n";
        }
        return kept;
      };
      EXPECT_EQ(lines(linked), lines(out));
      EXPECT_FALSE(lines(out).empty());
    }
  }
  // Without --bpe and --tokenizer, as in fairseq, the input is the model's subwords.
  const std::string src = leanseq::test::shared_path("fixtures/fairseq-pt/transformer");
  std::string out;
  ASSERT_EQ(run_command(kCli + " fairseq-interactive " + src + " --path " + src + "/model.pt -s de -t en --beam 5 < " + src +
                            "/test.tok.de 2>/dev/null",
                        out),
            0)
      << out;
  compare_fairseq_lines("fairseq-interactive on subwords", read_text(src + "/interactive.beam5.txt"), out, false);
  EXPECT_EQ(run_command(kCli + " fairseq-interactive " + src + " --path " + src + "/model.pt --bpe sentencepiece " +
                            "--sentencepiece-model " + src + "/spm.model --fp16 < /dev/null",
                        out),
            2);
  EXPECT_NE(out.find("unknown option '--fp16'"), std::string::npos) << out;
}

namespace {
// A split as fairseq-preprocess writes it (data::FairseqIndexedWriter, whose bytes the FairseqDataBin
// tests compare with fairseq's), from subword lines and a fairseq dictionary: what fairseq-generate read when
// the fixtures were made (test.tok.de, and the T lines of its output).
void write_fairseq_split(const std::string& prefix, const std::vector<std::string>& lines, const std::string& dict_path) {
  const auto dict = leanseq::data::Dictionary::load(dict_path);
  leanseq::data::FairseqIndexedWriter out(prefix, dict.size());
  for (const auto& line : lines) {
    std::istringstream in(line);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    out.add(dict.encode(words));
  }
  out.finish();
}
}  // namespace

// fairseq-generate's command line on the binarized test set: fairseq's S/T/H/D/P lines and the very
// BLEU line fairseq printed, for each fixture, at beam 5 and with three hypotheses per sentence.
TEST(ImportFairseqFixture, FairseqGenerateCommandLineGivesFairseqsLinesAndBleu) {
  if (leanseq::test::shared_path("fixtures/fairseq-pt").empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  const auto dir = temp_dir("fairseq-generate");
  for (const char* fixture : kFixtures) {
    const std::string src = leanseq::test::shared_path(std::string("fixtures/fairseq-pt/") + fixture);
    const std::string data = dir + "/" + fixture;
    std::filesystem::create_directories(data);
    for (const char* lang : {"de", "en"}) std::filesystem::copy_file(src + "/dict." + lang + ".txt", data + "/dict." + lang + ".txt");
    std::vector<std::string> source, target(50);
    std::istringstream tok(read_text(src + "/test.tok.de"));
    for (std::string l; std::getline(tok, l);) source.push_back(l);
    std::istringstream gen(read_text(src + "/gen.beam5.txt"));
    for (std::string l; std::getline(gen, l);) {
      if (l.rfind("T-", 0) == 0) target.at(std::stoul(l.substr(2))) = l.substr(l.find('\t') + 1);
    }
    write_fairseq_split(data + "/test.de-en.de", source, data + "/dict.de.txt");
    write_fairseq_split(data + "/test.de-en.en", target, data + "/dict.en.txt");
    std::vector<std::pair<std::string, std::string>> runs{{src + "/gen.beam5.txt", "--beam 5"},
                                                          {src + "/gen.nbest3_lenpen1.2.txt", "--beam 5 --nbest 3 --lenpen 1.2"}};
    if (std::string(fixture) == "transformer") {  // fairseq-generate's other flags (tests/fixtures/fairseq-generate-flags)
      const std::string flags = leanseq::test::tests_path("fixtures/fairseq-generate-flags");
      runs.push_back({flags + "/gen.beam5.post_sentencepiece.txt", "--beam 5 --post-process sentencepiece"});
      runs.push_back({flags + "/gen.beam5.prefix2.txt", "--beam 5 --prefix-size 2"});
      runs.push_back({flags + "/gen.beam5.bpe_sentencepiece.txt",
                      "--beam 5 --bpe sentencepiece --sentencepiece-model " + src + "/spm.model"});
      runs.push_back({flags + "/gen.beam5.remove_bpe.txt", "--remove-bpe --beam 5"});
      runs.push_back({flags + "/gen.beam5.score_reference.txt", "--beam 5 --score-reference"});
    }
    for (const auto& [file, flags] : runs) {
      std::string out;
      ASSERT_EQ(run_command(kCli + " fairseq-generate " + data + " --path " + src + "/model.pt --cpu --gen-subset test " +
                                "--batch-size 16 -s de -t en " + flags + " 2>/dev/null",
                            out),
                0)
          << out;
      const std::string expected = read_text(file);
      compare_fairseq_lines(std::string(fixture) + " fairseq-generate " + file, expected, out, true);
      auto last = [](const std::string& text) {
        const auto at = text.rfind("Generate test");
        return at == std::string::npos ? std::string() : text.substr(at, text.find('\n', at) - at);
      };
      EXPECT_FALSE(last(expected).empty()) << file;
      EXPECT_EQ(last(out), last(expected)) << fixture << " " << file;
      for (const char kind : {'S', 'T'}) {  // the same source and reference lines, whatever their order
        std::set<std::string> a, b;
        std::istringstream ea(expected), eb(out);
        for (std::string l; std::getline(ea, l);) {
          if (l.size() > 1 && l[0] == kind && l[1] == '-') a.insert(l);
        }
        for (std::string l; std::getline(eb, l);) {
          if (l.size() > 1 && l[0] == kind && l[1] == '-') b.insert(l);
        }
        EXPECT_EQ(a, b) << fixture << " " << kind << " lines";
      }
    }
  }
}

// fairseq-train's command line, as each fixture's train.sh ran it: the model leanseq builds has the
// configuration of the fairseq checkpoint that command made (imported), key by key, and fairseq's
// flags it does not take are refused by name.
TEST(ImportFairseqFixture, FairseqTrainCommandLineBuildsTheModelFairseqBuilt) {
  if (leanseq::test::shared_path("fixtures/fairseq-pt").empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  const auto dir = temp_dir("fairseq-train");
  // A joined-dictionary data-bin: the synthetic fixture's splits, with one dictionary for both sides.
  const std::string fixture_bin = leanseq::test::tests_path("fixtures/fairseq-data-bin");
  const std::string data = dir + "/data";
  std::filesystem::create_directories(data);
  for (const auto& e : std::filesystem::directory_iterator(fixture_bin)) {
    if (e.is_regular_file() && e.path().extension() != ".txt" && e.path().extension() != ".md") {
      std::filesystem::copy_file(e.path(), data + "/" + e.path().filename().string());
    }
  }
  const std::string joined = read_text(fixture_bin + "/dict.src.txt") + read_text(fixture_bin + "/dict.tgt.txt");
  for (const char* lang : {"src", "tgt"}) std::ofstream(data + "/dict." + lang + ".txt") << joined;
  for (const char* fixture : kFixtures) {
    const std::string src = leanseq::test::shared_path(std::string("fixtures/fairseq-pt/") + fixture);
    std::string line;
    std::istringstream script(read_text(src + "/train.sh"));
    for (std::string l; std::getline(script, l);) {
      if (l.rfind("fairseq-train bin ", 0) == 0) line = l.substr(std::string("fairseq-train bin ").size());
    }
    ASSERT_FALSE(line.empty()) << fixture;
    const std::string run = dir + "/" + fixture;
    std::filesystem::create_directories(run);
    std::string out;
    ASSERT_EQ(run_command("cd " + run + " && " + kCli + " fairseq-train " + data + " " + line +
                              " --max-update 1 --tokenizer moses",
                          out),
              0)
        << fixture << ": " << out;
    const auto ours = model_keys(run + "/ckpt/checkpoint_last.pt");
    const auto theirs = model_keys(import_fairseq_fixture(fixture, dir));
    ASSERT_FALSE(theirs.empty());
    for (const auto& [k, v] : theirs) {
      EXPECT_EQ(ours.count(k) ? ours.at(k) : "(missing)", v) << fixture << " " << k;
    }
  }
  std::string out;
  // fairseq's mixed precision: --bf16 trains in bfloat16 (float32 where the CPU has no bfloat16
  // products), --fp16 and --amp in float16 on CUDA, and the two kinds exclude each other.
  const std::string small = kCli + " fairseq-train " + data + " --arch transformer --optimizer adam --max-tokens 100 " +
                            "--encoder-embed-dim 16 --decoder-embed-dim 16 --encoder-ffn-embed-dim 32 " +
                            "--decoder-ffn-embed-dim 32 --encoder-layers 1 --decoder-layers 1 --encoder-attention-heads 2 " +
                            "--decoder-attention-heads 2 --max-update 1 --tokenizer moses --cpu --save-dir ";
  ASSERT_EQ(run_command("cd " + dir + " && " + small + "bf16 --bf16", out), 0) << out;
  EXPECT_EQ(leanseq::parse_yaml_text(leanseq::checkpoint::read_checkpoint(dir + "/bf16/checkpoint_last.pt").config_yaml, "ck")
                .values.at("optim.amp"),
            "bfloat16");
  EXPECT_EQ(run_command("cd " + dir + " && " + small + "fp16 --fp16", out), 2) << out;
  EXPECT_NE(out.find("optim.amp: float16 trains on CUDA only"), std::string::npos) << out;
  EXPECT_EQ(run_command("cd " + dir + " && " + small + "both --amp --bf16", out), 2) << out;
  EXPECT_NE(out.find("fairseq-train: --fp16/--amp (float16) and --bf16 (bfloat16): give one of them"), std::string::npos)
      << out;
  // An option that leanseq builds for one family only is refused for the other, defaults counted.
  EXPECT_EQ(run_command(kCli + " fairseq-train " + data + " --arch lightconv --optimizer adam --max-tokens 100 " +
                            "--decoder-output-dim 32 --tokenizer moses",
                        out),
            2);
  EXPECT_NE(out.find("fairseq option decoder_output_dim=32 changes the network"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " fairseq-train " + data + " --arch transformer_align --optimizer adam --max-tokens 100", out),
            2);
  EXPECT_NE(out.find("transformer_align"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " fairseq-train " + data + " --arch transformer --max-tokens 100", out), 2);
  EXPECT_NE(out.find("--optimizer is required"), std::string::npos) << out;
}

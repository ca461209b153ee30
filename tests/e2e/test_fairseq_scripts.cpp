// A fairseq user's script, with leanseq's program in place of fairseq's: each fixture's train.sh
// (../shared/fixtures/fairseq-pt/*/train.sh) has its fairseq-preprocess and fairseq-train lines run
// unchanged but for the program name and a smaller --max-update, on a slice of Multi30k encoded with
// the fixture's SentencePiece model, then fairseq-generate --path ckpt/checkpoint_last.pt and
// fairseq-interactive on that checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "e2e/task.h"

using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;
using leanseq::test::temp_dir;

namespace {

// The line of `script` that starts with `program` and a space ("" when there is none).
std::string line_of(const std::string& script, const std::string& program) {
  std::istringstream in(script);
  for (std::string l; std::getline(in, l);) {
    if (l.rfind(program + " ", 0) == 0) return l;
  }
  return "";
}

int count_lines_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  int n = 0;
  for (std::string l; std::getline(in, l);) n += l.rfind(prefix, 0) == 0;
  return n;
}

}  // namespace

TEST(FairseqScripts, EachFixturesTrainShRunsWithLeanseqsProgramNames) {
  const std::string fixtures = leanseq::test::shared_path("fixtures/fairseq-pt");
  const std::string multi30k = leanseq::test::shared_path("data/multi30k");
  if (fixtures.empty() || multi30k.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt and data/multi30k");
  const std::string spm_helper = std::filesystem::path(kCli).parent_path().string() + "/leanseq-spm";
  const auto dir = temp_dir("fairseq-scripts");
  std::set<std::string> seen;
  for (const char* fixture : {"transformer", "transformer_legacy", "lightconv_glu", "dynamicconv", "fconv"}) {
    const std::string src = fixtures + "/" + fixture, script = read_text(src + "/train.sh");
    const std::string preprocess = line_of(script, "fairseq-preprocess"), train = line_of(script, "fairseq-train");
    ASSERT_FALSE(preprocess.empty() || train.empty()) << fixture;
    if (!seen.insert(preprocess + "\n" + train).second) continue;  // transformer_legacy: transformer's lines
    const std::string run = dir + "/" + fixture;
    std::filesystem::create_directories(run);
    // train.sh's spm_encode, on the first 1000/100/50 lines of train/valid/test2016.
    const std::string encode = "enc() { sed 's/^/E\\t/' | " + spm_helper + " serve " + src +
                               "/spm.model | tail -n +2 | cut -f2-; }; for l in de en; do head -n 1000 " + multi30k +
                               "/train.$l | enc > train.sp.$l && head -n 100 " + multi30k +
                               "/valid.$l | enc > valid.sp.$l && head -n 50 " + multi30k +
                               "/test2016.$l | enc > test50.sp.$l || exit 1; done";
    std::string out;
    ASSERT_EQ(run_command("cd " + run + " && " + encode, out), 0) << out;
    ASSERT_EQ(run_command("cd " + run + " && " + kCli + " " + preprocess, out), 0) << fixture << ": " << out;
    ASSERT_EQ(run_command("cd " + run + " && " + kCli + " " + train + " --max-update 10", out), 0) << fixture << ": " << out;
    EXPECT_NE(out.find("done: 10 updates"), std::string::npos) << out;
    // fairseq-generate on the binarized test50 split: 50 sentences, S/T/H/D/P each, and the BLEU line.
    ASSERT_EQ(run_command("cd " + run + " && " + kCli +
                              " fairseq-generate bin --path ckpt/checkpoint_last.pt --beam 5 --max-len-b 20 "
                              "2>/dev/null",
                          out),
              0)
        << fixture << ": " << out;
    for (const char* kind : {"S-", "T-", "H-", "D-", "P-"}) EXPECT_EQ(count_lines_starting(out, kind), 50) << kind << out;
    EXPECT_EQ(count_lines_starting(out, "W-"), 0) << "fairseq-generate prints no W lines: " << out;
    EXPECT_EQ(count_lines_starting(out, "Generate test with beam=5: BLEU4 = "), 1) << out;
    // fairseq-interactive on raw text through the SentencePiece model: detokenized D lines.
    ASSERT_EQ(run_command("cd " + run + " && head -n 5 " + multi30k + "/test2016.de | " + kCli +
                              " fairseq-interactive bin --path ckpt/checkpoint_last.pt --beam 5 --max-len-b 20 "
                              "--bpe sentencepiece --sentencepiece-model " + src + "/spm.model 2>/dev/null",
                          out),
              0)
        << fixture << ": " << out;
    EXPECT_EQ(count_lines_starting(out, "D-"), 5) << out;
    EXPECT_EQ(count_lines_starting(out, "W-"), 5) << out;
    std::istringstream lines(out);
    std::string previous;
    for (std::string l; std::getline(lines, l); previous = l) {
      if (l.rfind("D-", 0) == 0) {
        EXPECT_EQ(l.find("\xe2\x96\x81"), std::string::npos) << "not detokenized: " << l;
      }
      // fairseq-interactive's timing line after each S line: "W-<id>\t<seconds, 3 decimals>\tseconds".
      if (l.rfind("W-", 0) == 0) {
        EXPECT_TRUE(std::regex_match(l, std::regex("W-[0-4]\t[0-9]+\\.[0-9]{3}\tseconds"))) << l;
        EXPECT_EQ(previous.rfind("S-" + l.substr(2, 1) + "\t", 0), 0u) << "after its S line: " << previous;
      }
    }
  }
  EXPECT_EQ(seen.size(), 4u);
}

// fairseq-train's checkpoint flags: --keep-last-epochs keeps the newest epoch checkpoints, and
// --restore-file resumes another save directory's checkpoint (model, optimizer, progress); a missing
// one is a usage error naming it (fairseq would start afresh). --log-format none drops the lines of
// each --log-interval.
TEST(FairseqScripts, KeepLastEpochsAndRestoreFile) {
  const std::string data = leanseq::test::tests_path("fixtures/fairseq-data-bin");
  const auto dir = temp_dir("fairseq-restore");
  const std::string train = "cd " + dir + " && " + kCli + " fairseq-train " + data +
                            " --arch transformer --encoder-embed-dim 16 --encoder-ffn-embed-dim 32 --encoder-layers 1 "
                            "--decoder-layers 1 --encoder-attention-heads 2 --decoder-attention-heads 2 "
                            "--optimizer adam --lr 0.001 --max-tokens 400 ";
  std::string out;
  ASSERT_EQ(run_command(train + "--max-epoch 4 --keep-last-epochs 2 --save-dir a --log-interval 1", out), 0) << out;
  EXPECT_NE(out.find("| info | epoch 1 | update 1 |"), std::string::npos) << out;  // --log-format simple, off a TTY
  for (const char* kept : {"checkpoint3.pt", "checkpoint4.pt", "checkpoint_last.pt", "checkpoint_best.pt"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/a/" + kept)) << kept;
  }
  for (const char* gone : {"checkpoint1.pt", "checkpoint2.pt"}) EXPECT_FALSE(std::filesystem::exists(dir + "/a/" + gone)) << gone;
  ASSERT_EQ(run_command(train + "--max-epoch 5 --restore-file a/checkpoint3.pt --save-dir b --log-interval 1 --log-format none",
                        out),
            0)
      << out;
  EXPECT_NE(out.find("resumed from a/checkpoint3.pt at epoch 4"), std::string::npos) << out;
  EXPECT_EQ(out.find("| info | epoch "), std::string::npos) << "--log-format none: " << out;
  EXPECT_NE(out.find("valid: epoch 5"), std::string::npos) << out;  // (validations are still logged)
  EXPECT_TRUE(std::filesystem::exists(dir + "/b/checkpoint5.pt"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/b/checkpoint3.pt"));
  EXPECT_EQ(run_command(train + "--max-epoch 5 --restore-file a/nothing.pt --save-dir c", out), 2) << out;
  EXPECT_NE(out.find("checkpoint.restore_file: a/nothing.pt does not exist"), std::string::npos) << out;
}

// --replace-unk on the fastBPE fixture with <unk> made likely (--unkpen -10): each <unk> of a
// translation becomes the source subword its A line aligns it to, or that word's entry in the
// dictionary file. (fairseq 0.12.2's own --replace-unk stops with a TypeError on such output: its
// hard alignments became pairs; leanseq does what the flag meant before.)
TEST(FairseqScripts, ReplaceUnkCopiesTheAlignedSourceSubword) {
  const std::string src = leanseq::test::tests_path("fixtures/fairseq-fastbpe");
  const auto dir = temp_dir("replace-unk");
  const std::string run = "head -n 3 " + src + "/input.de | " + kCli + " fairseq-interactive " + src + " --path " + src +
                          "/model.pt -s de -t en --tokenizer moses --bpe fastbpe --bpe-codes " + src +
                          "/bpecodes --beam 5 --unkpen -10 --print-alignment 2>&1 ";
  auto lines_of = [](const std::string& text, char kind) {
    std::vector<std::vector<std::string>> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      if (l.size() < 2 || l[0] != kind || l[1] != '-') continue;
      std::istringstream words(l.substr(l.find('\t') + 1));
      std::vector<std::string> w;
      for (std::string x; words >> x;) w.push_back(x);
      if (kind == 'H') w.erase(w.begin());  // the score
      out.push_back(w);
    }
    return out;
  };
  std::string plain, replaced, with_dict;
  ASSERT_EQ(run_command(run, plain), 0) << plain;
  ASSERT_EQ(run_command(run + "--replace-unk", replaced), 0) << replaced;
  { std::ofstream(dir + "/dict.txt") << "Ein A\n\nMann MAN extra\n"; }
  ASSERT_EQ(run_command(run + "--replace-unk " + dir + "/dict.txt", with_dict), 0) << with_dict;
  const auto sources = lines_of(plain, 'S'), before = lines_of(plain, 'H'), after = lines_of(replaced, 'H'),
             mapped = lines_of(with_dict, 'H'), aligned = lines_of(plain, 'A');
  ASSERT_EQ(before.size(), 3u);
  ASSERT_EQ(after.size(), 3u);
  int unknowns = 0;
  for (size_t s = 0; s < 3; ++s) {
    ASSERT_EQ(after[s].size(), before[s].size());
    for (size_t t = 0; t < before[s].size(); ++t) {
      if (before[s][t] != "<unk>") {
        EXPECT_EQ(after[s][t], before[s][t]);
        continue;
      }
      ++unknowns;
      const std::string pair = aligned[s][t];  // "src-tgt"
      const size_t at = std::stoul(pair.substr(0, pair.find('-')));
      EXPECT_EQ(after[s][t], sources[s][at]) << "sentence " << s << " token " << t;
      const std::string word = sources[s][at];
      EXPECT_EQ(mapped[s][t], word == "Ein" ? "A" : word == "Mann" ? "MAN" : word);
    }
  }
  EXPECT_GT(unknowns, 10);
  EXPECT_NE(with_dict.find("\tA "), std::string::npos) << with_dict;
  { std::ofstream(dir + "/bad.txt") << "Ein A\nMann\n"; }
  std::string out;
  EXPECT_EQ(run_command(run + "--replace-unk " + dir + "/bad.txt", out), 1) << out;
  EXPECT_NE(out.find(dir + "/bad.txt:2: a --replace-unk line is a source and a target word"), std::string::npos) << out;
}

// fairseq-score prints what fairseq 0.12.2's printed (tests/fixtures/fairseq-score, made by its
// make.sh): its arguments' line and its BLEU line, for real hypotheses and for lines its scorer
// treats apart (empty lines, <unk>, <pad>, </s>, tabs, capitals outside ASCII); --sentence-bleu
// (which stops with a TypeError in fairseq 0.12.2) gives each line's smoothed BLEU.
TEST(FairseqScripts, FairseqScorePrintsFairseqsLines) {
  const std::string src = leanseq::test::tests_path("fixtures/fairseq-score");
  std::string out;
  for (const char* name : {"widths", "edge"}) {
    for (const auto& [options, suffix] : std::vector<std::pair<std::string, std::string>>{
             {"", "plain"}, {"--ignore-case", "ignorecase"}, {"-o 3", "o3"}}) {
      const std::string cmd = "cd " + src + " && " + kCli + " fairseq-score -s " + name + ".sys -r " + name + ".ref " + options;
      ASSERT_EQ(run_command(cmd + " 2>&1", out), 0) << cmd << ": " << out;
      EXPECT_EQ(out, read_text(src + "/" + name + "." + suffix + ".out")) << cmd;
    }
  }
  // Standard input, and one line per sentence: a sentence equal to its reference scores 100.
  const auto dir = temp_dir("fairseq-score");
  std::ofstream(dir + "/ref") << "a b c d\nx y\n";
  ASSERT_EQ(run_command("printf 'a b c d\\nx z\\n' | " + kCli + " fairseq-score -r " + dir + "/ref --sentence-bleu 2>&1", out), 0)
      << out;
  EXPECT_NE(out.find("Namespace(sys='-', ref='" + dir + "/ref', order=4, ignore_case=False, sacrebleu=False, "
                     "sentence_bleu=True)\n0 BLEU4 = 100.00, 100.0/100.0/100.0/100.0 (BP=1.000, ratio=1.000, syslen=4, "
                     "reflen=4)\n1 BLEU4 = 70.71, 50.0/50.0/100.0/100.0 (BP=1.000, ratio=1.000, syslen=2, reflen=2)\n"),
            std::string::npos)
      << out;
  // sacreBLEU's line with --sacrebleu; files of different lengths are refused, not cut.
  ASSERT_EQ(run_command("printf 'a b c d\\nx y\\n' | " + kCli + " fairseq-score -r " + dir + "/ref --sacrebleu 2>&1", out), 0)
      << out;
  EXPECT_NE(out.find("\nBLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)"),
            std::string::npos)
      << out;
  EXPECT_EQ(run_command("printf 'a b c d\\n' | " + kCli + " fairseq-score -r " + dir + "/ref 2>&1", out), 1) << out;
  EXPECT_NE(out.find("<stdin> has 1 lines but " + dir + "/ref has 2"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " fairseq-score -r " + dir + "/ref -o 5 < /dev/null 2>&1", out), 2) << out;
}

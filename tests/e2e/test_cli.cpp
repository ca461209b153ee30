// Whole pipelines through the leanseq executable: synthetic pairs -> prepare -> train (seconds)
// -> translate -> score, and the bad-input paths with their exit codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "e2e/task.h"
#include "leanseq/checkpoint/file.h"
#include <leanseq/version.h>
#include "support/fixtures.h"

using leanseq::test::run_command;
using leanseq::test::temp_dir;
using leanseq::test::kCli;
using leanseq::test::prepare_task;

namespace {

// Trains `arch` into dir/name with the given extra flags, translates the test split with beam 4
// and returns its BLEU; `log` receives the training output.
double train_translate_score(const std::string& dir, const std::string& data, const std::string& arch,
                             const std::string& name, const std::string& flags, std::string& log) {
  const std::string ck = dir + "/" + name;
  int rc = run_command(kCli + " train --arch " + arch + " --data " + data + " --save-dir " + ck +
                           " --seed 3 --set batch.max_tokens=1000 --set log.interval=50 " + flags,
                       log);
  EXPECT_EQ(rc, 0) << log;
  std::string out;
  rc = run_command(kCli + " translate --checkpoint " + ck + "/checkpoint_best.pt --input " + dir +
                       "/test.src --output " + ck + ".hyp --beam 4",
                   out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("sentences/s"), std::string::npos) << out;
  rc = run_command(kCli + " score --ref " + dir + "/test.tgt --hyp " + ck + ".hyp --format json", out);
  EXPECT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(j["metric"], "bleu");
  std::cout << name << ": test BLEU " << j["score"].get<double>() << "\n";
  return j["score"].get<double>();
}

const std::string kAdam = "--max-update 400 --set optim.lr=0.003 --set optim.warmup_updates=50";
}  // namespace

TEST(EndToEnd, TransformerLearnsASyntheticTask) {
  auto dir = temp_dir("e2e");
  auto data = prepare_task(dir);
  std::string out;
  EXPECT_GT(train_translate_score(dir, data, "transformer_tiny", "ck", kAdam + " --log-format json", out), 80.0);
  EXPECT_NE(out.find("\"type\":\"valid\""), std::string::npos) << out;
  // The learning curve renders.
  int rc = run_command(kCli + " plot --log " + dir + "/ck/train_log.jsonl --output " + dir + "/curve.png", out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_GT(std::filesystem::file_size(dir + "/curve.png"), 1000u);
  rc = run_command(kCli + " plot --log " + dir + "/ck/train_log.jsonl --x update --output " + dir + "/curve.svg", out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(leanseq::test::read_text(dir + "/curve.svg").find("<svg"), std::string::npos);
  // A bad axis or a log that is not JSON: one line, the right exit code, no image.
  rc = run_command(kCli + " plot --log " + dir + "/ck/train_log.jsonl --x epoch --output " + dir + "/bad.png", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_EQ(out, "leanseq: error: --x must be minutes or update\n");
  std::ofstream(dir + "/not.jsonl") << "{\"type\":\"train\"}\nnot json\n";
  rc = run_command(kCli + " plot --log " + dir + "/not.jsonl --output " + dir + "/bad.png", out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("not.jsonl:2: not a JSON record"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line: " << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.png"));
  // Averaging three checkpoints gives the element-wise mean of their parameters, and it translates.
  const std::vector<std::string> inputs{dir + "/ck/checkpoint1.pt", dir + "/ck/checkpoint2.pt",
                                        dir + "/ck/checkpoint_last.pt"};
  rc = run_command(kCli + " average --inputs " + inputs[0] + " " + inputs[1] + " " + inputs[2] + " --output " + dir +
                       "/avg.pt",
                   out);
  ASSERT_EQ(rc, 0) << out;
  {
    std::vector<leanseq::checkpoint::Checkpoint> in;
    for (const auto& p : inputs) in.push_back(leanseq::checkpoint::read_checkpoint(p));
    auto avg = leanseq::checkpoint::read_checkpoint(dir + "/avg.pt");
    ASSERT_EQ(avg.model_tensors.size(), in[0].model_tensors.size());
    double spread = 0;  // how far the inputs are apart: averaging equal tensors would prove nothing
    for (const auto& [name, value] : avg.model_tensors) {
      auto expected = (in[0].model_tensors.at(name).to(torch::kDouble) + in[1].model_tensors.at(name).to(torch::kDouble) +
                       in[2].model_tensors.at(name).to(torch::kDouble)) /
                      3;
      EXPECT_LT(leanseq::test::max_abs_diff(value, expected), 1e-6) << name;
      spread = std::max(spread, leanseq::test::max_abs_diff(in[0].model_tensors.at(name), in[2].model_tensors.at(name)));
    }
    EXPECT_GT(spread, 1e-3);
  }
  // --dir with --last N: the N newest epoch checkpoints, as fairseq's average_checkpoints picks them.
  int64_t newest = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/ck")) {
    const std::string n = e.path().filename().string();
    if (n.rfind("checkpoint", 0) == 0 && n.find('_') == std::string::npos && isdigit(n[10])) {
      newest = std::max<int64_t>(newest, std::stoll(n.substr(10)));
    }
  }
  ASSERT_GE(newest, 2);
  rc = run_command(kCli + " average --dir " + dir + "/ck --last 2 -o " + dir + "/last2.pt", out);
  ASSERT_EQ(rc, 0) << out;
  rc = run_command(kCli + " average --inputs " + dir + "/ck/checkpoint" + std::to_string(newest) + ".pt " + dir +
                       "/ck/checkpoint" + std::to_string(newest - 1) + ".pt -o " + dir + "/listed2.pt",
                   out);
  ASSERT_EQ(rc, 0) << out;
  {
    auto a = leanseq::checkpoint::read_checkpoint(dir + "/last2.pt"), b = leanseq::checkpoint::read_checkpoint(dir + "/listed2.pt");
    for (const auto& [name, value] : a.model_tensors) EXPECT_LT(leanseq::test::max_abs_diff(value, b.model_tensors.at(name)), 1e-7) << name;
  }
  rc = run_command(kCli + " average --dir " + dir + "/ck --last 1000 -o " + dir + "/x.pt", out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("1000 epoch checkpoints asked for"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " average --dir " + dir + "/ck -o " + dir + "/x.pt", out), 2) << out;
  rc = run_command("echo 'a1 a2 a3' | " + kCli + " translate --checkpoint " + dir + "/avg.pt --greedy", out);
  EXPECT_EQ(rc, 0) << out;
  // Alignments: one "s-t" pair per target subword, after a tab.
  rc = run_command("echo 'a1 a2 a3' | " + kCli + " translate --checkpoint " + dir +
                       "/ck/checkpoint_best.pt --print-alignment 2>/dev/null",
                   out);
  EXPECT_EQ(rc, 0) << out;
  // One "source-target" pair per target piece but the final </s>: targets 0, 1, 2, ... in order,
  // each source a position of the 6 pieces and </s> of "a1 a2 a3" ("\u2581a" "1" ...). Which
  // position the search picks is checked exactly in tests/decode (a decoder with known
  // attention) and by the ConvS2S test below (a model whose alignment is the copy diagonal).
  auto tab = out.find('\t');
  ASSERT_NE(tab, std::string::npos) << out;
  std::istringstream pairs(out.substr(tab + 1, out.find('\n', tab) - tab - 1));
  int64_t expected_target = 0;
  for (std::string pair; pairs >> pair; ++expected_target) {
    const auto dash = pair.find('-');
    ASSERT_NE(dash, std::string::npos) << pair;
    const int64_t source = std::stoll(pair.substr(0, dash)), target = std::stoll(pair.substr(dash + 1));
    EXPECT_EQ(target, expected_target) << out;
    EXPECT_GE(source, 0) << out;
    EXPECT_LE(source, 6) << out;
  }
  EXPECT_GE(expected_target, 3) << out;
  std::cout << "alignment: " << out;
}

TEST(EndToEnd, SanFromTheAnalysisOfABaselineAndAnAanDecoderLearn) {
  auto dir = temp_dir("e2e-san");
  auto data = prepare_task(dir);
  std::string log, out;
  EXPECT_GT(train_translate_score(dir, data, "transformer_tiny", "base", kAdam, log), 60.0);
  // The analysis of the baseline: matrices, heatmaps and a config with the proposed blocks.
  int rc = run_command(kCli + " analyze attention --checkpoint " + dir + "/base/checkpoint_best.pt --theta 0 -o " +
                           dir + "/analysis",
                       out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("model.decoder.encoder_attn_groups: \"0-1\""), std::string::npos) << out;
  auto report = nlohmann::json::parse(leanseq::test::read_text(dir + "/analysis/similarity.json"));
  for (const char* kind : {"encoder_self_attention", "decoder_self_attention", "encoder_decoder_attention"}) {
    auto m = report["kinds"][kind]["similarity"];
    ASSERT_EQ(m.size(), 2u) << kind;
    EXPECT_DOUBLE_EQ(m[0][0].get<double>(), 1.0);
    EXPECT_GT(m[0][1].get<double>(), 0.0);
    EXPECT_LT(m[0][1].get<double>(), 1.0);
    EXPECT_GT(std::filesystem::file_size(dir + "/analysis/" + kind + ".png"), 1000u);
    EXPECT_NE(leanseq::test::read_text(dir + "/analysis/" + kind + ".csv").find("layer,0,1"), std::string::npos);
  }
  // Fed straight into training, starting from the baseline's parameters.
  EXPECT_GT(train_translate_score(dir, data, "transformer_tiny", "san",
                                  "-c " + dir + "/analysis/groups.yaml --set checkpoint.init_from=" + dir +
                                      "/base/checkpoint_best.pt --max-update 200 --set optim.lr=0.003 "
                                      "--set optim.warmup_updates=50",
                                  log),
            60.0);
  EXPECT_NE(log.find("16 of the checkpoint unused"), std::string::npos) << log;
  EXPECT_GT(train_translate_score(dir, data, "transformer_tiny_san_aan", "aan", kAdam, log), 60.0);
  // Bad input.
  rc = run_command(kCli + " analyze attention --checkpoint " + dir + "/base/checkpoint_best.pt --theta 2 -o " + dir +
                       "/a2",
                   out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--theta"), std::string::npos) << out;
  rc = run_command(kCli + " train --arch transformer_tiny --data " + data + " --save-dir " + dir +
                       "/x --set checkpoint.init_from=" + dir + "/missing.pt",
                   out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("missing.pt"), std::string::npos) << out;
  rc = run_command(kCli + " train --arch transformer_tiny --data " + data + " --save-dir " + dir +
                       "/x --set model.decoder.encoder_attn_groups=0-2",
                   out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("model.decoder.encoder_attn_groups"), std::string::npos) << out;
}

TEST(EndToEnd, TransformerWithADisanEncoderLearnsTheSyntheticTask) {
  auto dir = temp_dir("disanenc");
  auto data = prepare_task(dir);
  std::string out;
  EXPECT_GT(train_translate_score(dir, data, "transformer_tiny", "ck", kAdam + " --set model.encoder.type=disan", out), 60.0);
}

TEST(EndToEnd, LightweightAndDynamicConvLearnTheSyntheticTask) {
  auto dir = temp_dir("e2e-conv");
  auto data = prepare_task(dir);
  for (const std::string arch : {"lightconv_tiny", "dynamicconv_tiny"}) {
    std::string log;
    EXPECT_GT(train_translate_score(dir, data, arch, arch, kAdam, log), 60.0) << arch;
  }
}

TEST(EndToEnd, ConvS2STrainsWithNagAndDrawsItsAttention) {
  auto dir = temp_dir("e2e-fconv");
  auto data = prepare_task(dir);
  std::string out;
  const std::string nag =
      "--max-update 300 --set optim.optimizer=nag --set optim.lr=0.25 --set optim.lr_scheduler=fixed "
      "--set optim.warmup_updates=0 --set optim.clip_norm=0.1";
  EXPECT_GT(train_translate_score(dir, data, "fconv_tiny", "ck", nag, out), 60.0);
  // The task copies word by word: each word is two pieces ("\u2581a" "1" -> "\u2581b" "1"), and the
  // piece that carries the information, the digit, attends most to the source digit at the same
  // position. Alignment pairs are "source-target".
  int rc = run_command("echo 'a1 a2 a3 a4' | " + kCli + " translate --checkpoint " + dir +
                       "/ck/checkpoint_best.pt --print-alignment 2>/dev/null",
                   out);
  ASSERT_EQ(rc, 0) << out;
  auto tab = out.find('\t');
  ASSERT_NE(tab, std::string::npos) << out;
  for (const std::string pair : {" 1-1 ", " 3-3 ", " 5-5 ", " 7-7\n"})
    EXPECT_NE((" " + out.substr(tab + 1)).find(pair), std::string::npos) << pair << " in " << out;
  for (const std::string ext : {"png", "svg"}) {
    rc = run_command(kCli + " attention --checkpoint " + dir + "/ck/checkpoint_best.pt --source 'a5 a6 a7' --output " +
                         dir + "/attn." + ext,
                     out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_GT(std::filesystem::file_size(dir + "/attn." + ext), 500u);
  }
  EXPECT_NE(leanseq::test::read_text(dir + "/attn.svg").find("<svg"), std::string::npos);
  // Bad input to the attention command: a usage error, and a missing checkpoint named; no image.
  rc = run_command(kCli + " attention --checkpoint " + dir + "/ck/checkpoint_best.pt --source 'a5' --beam 0 --output " +
                       dir + "/bad.png",
                   out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("beam: expected an integer in [1, 1024], got 0"), std::string::npos) << out;
  rc = run_command(kCli + " attention --checkpoint " + dir + "/missing.pt --source 'a5' --output " + dir + "/bad.png",
                   out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("missing.pt"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.png"));
  // An out-of-range NAG momentum is a configuration error naming the key.
  rc = run_command(kCli + " train --arch fconv_tiny --data " + data + " --save-dir " + dir +
                       "/bad --max-update 1 --set optim.optimizer=nag --set optim.momentum=1.5",
                   out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("optim.momentum"), std::string::npos) << out;
  // A malformed layer spec is a configuration error naming the key.
  rc = run_command(kCli + " train --arch fconv_tiny --data " + data + " --save-dir " + dir +
                       "/bad --max-update 1 --set 'model.encoder.layers=[(64, 3)] * '",
                   out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("encoder.layers"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad/checkpoint_last.pt"));
}

TEST(EndToEnd, PervasiveAttentionLearnsWithRecomputationAndShowsItsAlignment) {
  auto dir = temp_dir("e2e-pervasive");
  auto data = prepare_task(dir);
  std::string log, out;
  // The grid learns this task at a higher learning rate than the Transformer's.
  EXPECT_GT(train_translate_score(dir, data, "pervasive_tiny", "ck",
                                  "--max-update 400 --set optim.lr=0.01 --set optim.warmup_updates=50 "
                                  "--set model.memory_efficient=true --set batch.max_cells=4000",
                                  log),
            60.0);
  // The max aggregator's implicit alignment: one "s-t" pair per target piece.
  int rc = run_command("echo 'a1 a2 a3' | " + kCli + " translate --checkpoint " + dir +
                           "/ck/checkpoint_best.pt --print-alignment 2>/dev/null",
                       out);
  ASSERT_EQ(rc, 0) << out;
  auto tab = out.find('\t');
  ASSERT_NE(tab, std::string::npos) << out;
  EXPECT_NE(out.find("-1", tab), std::string::npos) << out;
  rc = run_command(kCli + " attention --checkpoint " + dir + "/ck/checkpoint_best.pt --source 'a5 a6 a7' --output " +
                       dir + "/align.png",
                   out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_GT(std::filesystem::file_size(dir + "/align.png"), 500u);
  // Pairs over the length limit: an error naming the pair and the way out, or left out.
  rc = run_command(kCli + " train --arch pervasive_tiny --data " + data + " --save-dir " + dir +
                       "/long --max-update 2 --set batch.max_source_len=12",
                   out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("batch.max_source_len 12"), std::string::npos) << out;
  EXPECT_NE(out.find("batch.too_long: skip"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/long/checkpoint_last.pt"));
  rc = run_command(kCli + " train --arch pervasive_tiny --data " + data + " --save-dir " + dir +
                       "/long --max-update 2 --set batch.max_source_len=12 --set batch.too_long=skip",
                   out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("over the length limits and left out"), std::string::npos) << out;
  rc = run_command(kCli + " train --arch pervasive_tiny --data " + data + " --save-dir " + dir +
                       "/long3 --max-update 2 --set batch.max_source_len=2 --set batch.too_long=skip",
                   out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("every pair is over"), std::string::npos) << out;
  rc = run_command(kCli + " train --arch pervasive_tiny --data " + data + " --save-dir " + dir +
                       "/long2 --max-update 2 --set batch.too_long=drop",
                   out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("batch.too_long"), std::string::npos) << out;
}

TEST(EndToEnd, LanguageModelTrainsAndReportsPerplexity) {
  auto dir = temp_dir("e2e-lm");
  leanseq::test::write_task_splits(dir);
  std::string out;
  int rc = run_command(kCli + " prepare --lm --lang tgt --train " + dir + "/train --valid " + dir + "/valid --test " +
                           dir + "/test --out " + dir + "/lm --vocab-size 40",
                       out);
  ASSERT_EQ(rc, 0) << out;
  for (const std::string arch : {"lightconv_lm_tiny", "transformer_lm_tiny"}) {
    const std::string ck = dir + "/" + arch;
    rc = run_command(kCli + " train --arch " + arch + " --data " + dir + "/lm --save-dir " + ck +
                         " --max-update 150 --set optim.lr=0.003 --set optim.warmup_updates=30 --set batch.max_tokens=1000",
                     out);
    ASSERT_EQ(rc, 0) << out;
    rc = run_command(kCli + " eval-lm --checkpoint " + ck + "/checkpoint_last.pt --data " + dir +
                         "/lm --split test --format json",
                     out);
    ASSERT_EQ(rc, 0) << out;
    auto j = nlohmann::json::parse(out.substr(out.find('{')));
    // Words are uniform over 20 symbols (plus their subword pieces and </s>): a trained model sits
    // near that, an untrained one near the vocabulary size.
    std::cout << arch << ": test perplexity " << j["perplexity"].get<double>() << "\n";
    EXPECT_GT(j["tokens"].get<int64_t>(), 100);
    EXPECT_LT(j["perplexity"].get<double>(), 25.0) << out;
    // translate continues a line with a language model: the text begins with the line.
    rc = run_command("echo b1 b2 | " + kCli + " translate --checkpoint " + ck + "/checkpoint_last.pt -o " + ck + "/out.txt",
                     out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(leanseq::test::read_text(ck + "/out.txt").rfind("b1 b2 ", 0), 0u) << arch;
  }
  // Mismatches between model kinds and data kinds are usage errors.
  rc = run_command(kCli + " train --arch transformer_tiny --data " + dir + "/lm --save-dir " + dir + "/ck2", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("language-model corpus"), std::string::npos) << out;
  rc = run_command(kCli + " prepare --lm --lang tgt --src src --train " + dir + "/train --valid " + dir + "/valid --out " +
                       dir + "/lm2",
                   out);
  EXPECT_EQ(rc, 2) << out;
}

TEST(EndToEnd, BadInputsGiveOneClearLineAndExitCodes) {
  auto dir = temp_dir("bad");
  std::string out;
  // Unknown config key: exit 2, named, with a hint.
  int rc = run_command(kCli + " train --data " + dir + " --set model.encoder.layer=3", out);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("unknown key 'model.encoder.layer'; did you mean 'model.encoder.layers'?"), std::string::npos) << out;
  // Unknown arch: exit 2.
  rc = run_command(kCli + " train --arch transformr --data " + dir, out);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("unknown arch 'transformr'"), std::string::npos) << out;
  // Missing prepared data: exit 1, names the file.
  rc = run_command(kCli + " train --data " + dir + "/nothing", out);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find(dir + "/nothing/meta.yaml: not found"), std::string::npos) << out;
  // Mismatched corpus: exit 1, names both files and counts; nothing written.
  std::ofstream(dir + "/t.src") << "a b\nc d\n";
  std::ofstream(dir + "/t.tgt") << "x y\n";
  rc = run_command(kCli + " prepare --src src --tgt tgt --train " + dir + "/t --valid " + dir + "/t --out " + dir + "/o",
                   out);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find(dir + "/t.src has 2 lines but " + dir + "/t.tgt has 1"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/o/meta.yaml"));
  // Invalid UTF-8 in a hypothesis file: exit 1 with file:line.
  std::ofstream(dir + "/ref.txt") << "fine\nfine\n";
  std::ofstream(dir + "/hyp.txt") << "fine\nbad \xff\n";
  rc = run_command(kCli + " score --ref " + dir + "/ref.txt --hyp " + dir + "/hyp.txt", out);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find(dir + "/hyp.txt:2: invalid UTF-8"), std::string::npos) << out;
  // The same from standard input.
  std::ofstream(dir + "/ref1.txt") << "fine\n";
  rc = run_command("printf 'bad \\377\\n' | " + kCli + " score --ref " + dir + "/ref1.txt --hyp -", out);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("<stdin>:1: invalid UTF-8"), std::string::npos) << out;
  // A truncated checkpoint: exit 1, names the file.
  std::ofstream(dir + "/bad.pt") << "PK\x03\x04garbage";
  rc = run_command("echo hi | " + kCli + " translate --checkpoint " + dir + "/bad.pt", out);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find(dir + "/bad.pt: cannot read checkpoint"), std::string::npos) << out;
  // Usage errors exit 2.
  rc = run_command(kCli + " score --hyp x", out);
  EXPECT_EQ(rc, 2);
  rc = run_command(kCli + " score --ref " + dir + "/ref.txt --hyp " + dir + "/ref.txt --metric meteor", out);
  EXPECT_EQ(rc, 2);
  // TER ignores case, as sacreBLEU's, unless --case-sensitive; the flag belongs to TER alone.
  std::ofstream(dir + "/upper.txt") << "Fine\nfine\n";
  const std::string ter = kCli + " score --ref " + dir + "/ref.txt --hyp " + dir + "/upper.txt --metric ter";
  EXPECT_EQ(run_command(ter, out), 0) << out;
  EXPECT_NE(out.find("TER = 0.00 (0 edits"), std::string::npos) << out;
  EXPECT_EQ(run_command(ter + " --lowercase", out), 0) << out;
  EXPECT_NE(out.find("TER = 0.00 (0 edits"), std::string::npos) << out;
  EXPECT_EQ(run_command(ter + " --case-sensitive", out), 0) << out;
  EXPECT_NE(out.find("TER = 50.00 (1 edits"), std::string::npos) << out;
  EXPECT_EQ(run_command(ter + " --case-sensitive --lowercase", out), 2) << out;
  EXPECT_EQ(run_command(kCli + " score --ref " + dir + "/ref.txt --hyp " + dir + "/upper.txt --case-sensitive", out), 2)
      << out;
  EXPECT_NE(out.find("--case-sensitive is TER's"), std::string::npos) << out;
}

TEST(EndToEnd, UnknownCommandsAndOptionsAreNamed) {
  std::string out;
  int rc = run_command(kCli + " frobnicate", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("leanseq: unknown command 'frobnicate'; the commands are: prepare, train, translate"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line: " << out;
  rc = run_command(kCli + " analyze frobnicate", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("leanseq analyze: unknown command 'frobnicate'; the commands are: attention, prune"),
            std::string::npos)
      << out;
  rc = run_command(kCli + " score --ref a --frobnicate=3", out);  // --hyp missing too
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("leanseq score: unknown option '--frobnicate'; its options are: "), std::string::npos) << out;
  EXPECT_NE(out.find("--ref"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line: " << out;
  // A command alone still asks for what it needs; the commands themselves still run.
  rc = run_command(kCli, out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_EQ(run_command(kCli + " --version", out), 0) << out;
  EXPECT_NE(out.find(std::string("leanseq ") + leanseq::kVersion + "\nBLAS: "), std::string::npos) << out;
  EXPECT_NE(out.find("idle threads: "), std::string::npos) << out;
}

TEST(EndToEnd, TokenizeIsALineFilterBothWays) {
  auto dir = temp_dir("tokenize");
  std::ofstream(dir + "/codes") << "#version: 0.2\nM ä\nMä n\nn e\ne r</w>\n";
  std::string out;
  // One line out per line in, an invalid one as an empty line with a warning naming it.
  int rc = run_command("{ printf 'Männer, \"hier\".\\nbad \\377\\nok.\\n' | " + kCli + " tokenize -l de 2>/dev/null; }", out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "Männer , &quot; hier &quot; .\n\nok .\n");
  rc = run_command("{ printf 'bad \\377\\n' | " + kCli + " tokenize -l de 2>&1 >/dev/null; }", out);
  EXPECT_NE(out.find("leanseq: <stdin>:1: invalid UTF-8"), std::string::npos) << out;
  rc = run_command("echo 'Männer, \"hier\".' | " + kCli + " tokenize -l de --no-escape --bpe-codes " + dir + "/codes", out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "Män@@ ne@@ r , \" h@@ i@@ er \" .\n");  // merges in the codes' order
  rc = run_command("echo 'Män@@ n@@ er , &quot; hier &quot; .' | " + kCli + " tokenize -l de -d --bpe-codes " + dir + "/codes",
                   out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "Männer, \"hier\".\n");
  EXPECT_EQ(run_command(kCli + " tokenize -l de --glossaries x < /dev/null", out), 2) << out;
}

TEST(EndToEnd, ABadProductsSettingStopsEveryCommandBeforeItStarts) {
  std::string out;
  EXPECT_EQ(run_command("LEANSEQ_ONEDNN_ROWS=many " + kCli + " list-archs", out), 2) << out;
  EXPECT_EQ(out, "leanseq: error: LEANSEQ_ONEDNN_ROWS=many: expected a number of rows (0 sends no product to oneDNN)\n");
  ASSERT_EQ(run_command("LEANSEQ_ONEDNN_ROWS=0 " + kCli + " list-archs", out), 0) << out;
  EXPECT_EQ(run_command("LEANSEQ_TRAINING_PRODUCTS=blas " + kCli + " list-archs", out), 2) << out;
  EXPECT_EQ(out, "leanseq: error: LEANSEQ_TRAINING_PRODUCTS=blas: expected onednn or aten\n");
  ASSERT_EQ(run_command("LEANSEQ_TRAINING_PRODUCTS=aten " + kCli + " list-archs", out), 0) << out;
  EXPECT_EQ(run_command("LEANSEQ_PACKED_WEIGHTS=yes " + kCli + " list-archs", out), 2) << out;
  EXPECT_EQ(out, "leanseq: error: LEANSEQ_PACKED_WEIGHTS=yes: expected 1 or 0\n");
  EXPECT_EQ(run_command("LEANSEQ_PACKED_WEIGHTS_MB=0 " + kCli + " list-archs", out), 2) << out;
  EXPECT_EQ(out, "leanseq: error: LEANSEQ_PACKED_WEIGHTS_MB=0: expected a whole number of MiB, at least 1\n");
  ASSERT_EQ(run_command("LEANSEQ_PACKED_WEIGHTS=0 LEANSEQ_PACKED_WEIGHTS_MB=64 " + kCli + " list-archs", out), 0) << out;
}

TEST(EndToEnd, ListArchsPrintsNamesFirst) {
  std::string out;
  ASSERT_EQ(run_command(kCli + " list-archs", out), 0);
  EXPECT_EQ(out.rfind("transformer\t", 0), 0u) << out;
  EXPECT_NE(out.find("\ntransformer_iwslt_de_en\ttransformer\tlayers 6+6, dim 512, ffn 1024, heads 4"), std::string::npos);
  EXPECT_NE(out.find("\ntransformer_vaswani_wmt_en_de_big\t"), std::string::npos);
}

// train --list-keys: a preset's keys with their values; a bad key or arch is one line, exit 2.
TEST(EndToEnd, ListKeysPrintsAPresetsKeysAndNamesABadOne) {
  std::string out;
  ASSERT_EQ(run_command(kCli + " train --list-keys --arch transformer_iwslt_de_en 2>&1", out), 0) << out;
  EXPECT_EQ(out.rfind("| key | type | default | help |\n", 0), 0u) << out;
  EXPECT_NE(out.find("| `model.encoder.ffn_embed_dim` | int | `1024` |"), std::string::npos) << out;
  ASSERT_EQ(run_command(kCli + " train --list-keys --task classify 2>&1", out), 0) << out;
  EXPECT_NE(out.find("| `data.train` | string |"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " train --list-keys --set model.encoder.layer=3 2>&1", out), 2);
  EXPECT_EQ(out, "leanseq: error: --set: unknown key 'model.encoder.layer'; did you mean 'model.encoder.layers'?\n");
  EXPECT_EQ(run_command(kCli + " train --list-keys --arch no_such_arch 2>&1", out), 2);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("no_such_arch"), std::string::npos) << out;
}

TEST(EndToEnd, SigtermSavesAndExits143) {
  auto dir = temp_dir("sig");
  auto data = prepare_task(dir);
  std::string out;
  int rc = run_command("timeout --preserve-status -s TERM 8 " + kCli + " train --arch transformer_tiny --data " + data + " --save-dir " +
                           dir + "/ck --log-format text",
                       out);
  EXPECT_EQ(rc, 143) << out;
  EXPECT_NE(out.find("signal 15 received"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/ck/checkpoint_last.pt"));
  rc = run_command(kCli + " train --arch transformer_tiny --data " + data + " --save-dir " + dir +
                       "/ck --resume --max-update 1 --log-format text",
                   out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
}

// stop.patience (--patience): a learning rate too small to move any float32 weight keeps the valid
// loss exactly where it was, so the first validation is the best and training stops after
// `patience` more, long before --max-update.
TEST(EndToEnd, PatienceStopsTrainingThatNoLongerImproves) {
  const auto dir = temp_dir("patience");
  const auto data = prepare_task(dir);
  std::string out;
  const int rc = run_command(kCli + " train --arch transformer_tiny --data " + data + " --save-dir " + dir +
                                 "/ck --max-update 200 --patience 2 --seed 1 --set valid.interval_updates=5 "
                                 "--set optim.lr=1e-12 --set optim.warmup_updates=0 --set model.dropout=0 "
                                 "--set batch.max_tokens=500 --log-format text",
                             out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("stopping: 2 validations without a better loss"), std::string::npos) << out;
  EXPECT_NE(out.find("done: 15 updates"), std::string::npos) << out;
  // A negative patience and no accumulation at all are usage errors, whatever the task.
  EXPECT_EQ(run_command(kCli + " train --arch transformer_tiny --data " + data + " --patience -1", out), 2) << out;
  EXPECT_EQ(run_command(kCli + " train --task classify --arch disan_small --update-freq 0", out), 2) << out;
  EXPECT_NE(out.find("--update-freq"), std::string::npos) << out;
}

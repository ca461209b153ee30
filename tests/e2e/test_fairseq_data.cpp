// A directory written by fairseq-preprocess (tests/fixtures/fairseq-data-bin, fairseq 0.12.2's own
// output) read as it is: its ids are the text's words through its dictionaries, damaged indexes are
// refused by name, and `train --data` trains on it with the text pipeline it is given, into a
// checkpoint that translates.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "e2e/task.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/prepare.h"

using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;
using leanseq::test::temp_dir;

namespace {
const std::string kDir = leanseq::test::tests_path("fixtures/fairseq-data-bin");

std::string refusal(const std::string& prefix) {
  return leanseq::test::data_error_of([&] { leanseq::data::IndexedDataset ds(prefix); });
}
}  // namespace

TEST(FairseqDataBin, ItsIdsAreTheTextsWordsThroughItsDictionaries) {
  const auto meta = leanseq::data::load_prepared(kDir);
  EXPECT_EQ(meta.format, "fairseq");
  EXPECT_EQ(meta.src_lang, "src");
  EXPECT_EQ(meta.tgt_lang, "tgt");
  EXPECT_FALSE(meta.joint);
  for (const char* lang : {"src", "tgt"}) {
    const auto dict = leanseq::data::Dictionary::load(kDir + "/dict." + lang + ".txt");
    leanseq::data::IndexedDataset ds(meta.split_prefix("train", lang));
    std::istringstream text(read_text(kDir + "/text/train." + lang));
    size_t i = 0;
    for (std::string line; std::getline(text, line); ++i) {
      ASSERT_LT(i, ds.size());
      std::string words;
      for (int64_t id : ds.get(i)) words += (words.empty() ? "" : " ") + dict.symbol(id);
      ASSERT_EQ(words, line + " </s>") << lang << " line " << i + 1;
    }
    EXPECT_EQ(i, 300u);
    EXPECT_EQ(ds.size(), 300u);
  }
}

TEST(FairseqDataBin, DamagedIndexesAreRefusedByName) {
  const auto dir = temp_dir("fairseq-index");
  const std::string idx = read_text(kDir + "/train.src-tgt.src.idx"), bin = read_text(kDir + "/train.src-tgt.src.bin");
  auto write = [&](const std::string& i, const std::string& b) {
    std::ofstream(dir + "/x.idx", std::ios::binary) << i;
    std::ofstream(dir + "/x.bin", std::ios::binary) << b;
    return dir + "/x";
  };
  EXPECT_EQ(refusal(write(idx, bin)), "");
  EXPECT_NE(refusal(write(idx.substr(0, idx.size() - 8), bin)).find("its header says 300 sentences"), std::string::npos);
  auto with = [&](size_t at, char c) {
    auto s = idx;
    s[at] = c;
    return s;
  };
  EXPECT_NE(refusal(write(with(17, 6), bin)).find("dtype code 6 is not an integer type"), std::string::npos);
  EXPECT_NE(refusal(write(with(9, 2), bin)).find("fairseq index version 2"), std::string::npos);
  EXPECT_NE(refusal(write(with(18, 0x7f), bin)).find("its header says"), std::string::npos);  // the count
  EXPECT_NE(refusal(write(with(26 + 4 * 300 + 8 * 5, 3), bin)).find("sentence 5 does not follow"), std::string::npos);
  EXPECT_NE(refusal(write(with(26 + 4 * 7 + 3, '\x80'), bin)).find("sentence 7 has a negative size"), std::string::npos);
  EXPECT_NE(refusal(write(idx, bin.substr(0, bin.size() - 2))).find("does not match its index"), std::string::npos);
  EXPECT_NE(refusal(write("MMIDIDX", bin)).find("bad magic"), std::string::npos);
}

// --dataset-impl lazy (and cached, the same files): fairseq's TorchNet index, ids stored + 1; the
// same sentences as the mmap files of the same text, and a damaged index refused by name.
TEST(FairseqDataBin, LazyAndCachedIndexesHoldTheSameSentences) {
  for (const char* side : {"src", "tgt"}) {
    const std::string name = std::string("/valid.src-tgt.") + side;
    leanseq::data::IndexedDataset mmap(kDir + name), lazy(kDir + "/lazy" + name);
    ASSERT_EQ(lazy.size(), 30u);
    ASSERT_EQ(lazy.size(), mmap.size());
    for (size_t i = 0; i < mmap.size(); ++i) EXPECT_EQ(lazy.get(i), mmap.get(i)) << side << " " << i;
  }
  const auto dir = temp_dir("fairseq-lazy");
  const std::string idx = read_text(kDir + "/lazy/valid.src-tgt.src.idx");
  const std::string bin = read_text(kDir + "/lazy/valid.src-tgt.src.bin");
  auto write = [&](const std::string& i) {
    std::ofstream(dir + "/x.idx", std::ios::binary) << i;
    std::ofstream(dir + "/x.bin", std::ios::binary) << bin;
    return dir + "/x";
  };
  EXPECT_EQ(refusal(write(idx)), "");
  EXPECT_NE(refusal(write(idx.substr(0, idx.size() - 8))).find("its header says 30 sentences"), std::string::npos);
  auto with = [&](size_t at, char c) {
    auto s = idx;
    s[at] = c;
    return s;
  };
  EXPECT_NE(refusal(write(with(16, 6))).find("dtype code 6 with 4-byte elements"), std::string::npos);
  EXPECT_NE(refusal(write(with(8, 2))).find("fairseq index version 2"), std::string::npos);
  // sentence 3's data offset (after the header and 31 dimension offsets)
  EXPECT_NE(refusal(write(with(48 + 8 * 31 + 8 * 3, 1))).find("sentence 2's offsets do not match"), std::string::npos);
}

TEST(FairseqDataBin, TrainReadsItWithTheTextPipelineItIsGiven) {
  const auto dir = temp_dir("fairseq-train");
  std::string out;
  const std::string train = kCli + " train --arch transformer_tiny --data " + kDir + " --save-dir " + dir +
                            "/ck --max-update 8 --seed 1 --set batch.max_tokens=1000";
  EXPECT_EQ(run_command(train, out), 2) << out;
  EXPECT_NE(out.find("was written by fairseq-preprocess and holds no text pipeline"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ck/checkpoint_last.pt"));
  ASSERT_EQ(run_command(train + " --set text.tokenizer=moses", out), 0) << out;
  EXPECT_NE(out.find("300 training pairs, 30 valid"), std::string::npos) << out;
  // The checkpoint carries the pipeline: it translates raw text.
  std::ofstream(dir + "/in.txt") << "a1 a2 a3\na4\n";
  ASSERT_EQ(run_command("{ " + kCli + " translate --checkpoint " + dir + "/ck/checkpoint_last.pt -i " + dir +
                            "/in.txt --max-len-b 5 2>/dev/null; }",
                        out),
            0)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
  // text.* belongs to directories without a pipeline; a misspelt tokenizer is named.
  const auto leanseq_dir = leanseq::test::prepare_task(dir);
  EXPECT_EQ(run_command(kCli + " train --arch transformer_tiny --data " + leanseq_dir + " --save-dir " + dir +
                            "/ck2 --max-update 1 --set text.tokenizer=moses",
                        out),
            2);
  EXPECT_NE(out.find("are for data without a text pipeline"), std::string::npos) << out;
  EXPECT_EQ(run_command(train + " --set text.tokenizer=mosses", out), 2) << out;
  EXPECT_NE(out.find("text.tokenizer: unknown tokenizer 'mosses'"), std::string::npos) << out;
}

// fairseq-preprocess's command line, run by leanseq on the fixture's text, writes the very bytes
// fairseq 0.12.2 wrote: dictionaries (counts, ties, padding, --nwordssrc) and binarized splits,
// separate and joined, with one thread or three.
TEST(FairseqDataBin, FairseqPreprocessWritesFairseqsBytes) {
  const auto dir = temp_dir("fairseq-preprocess");
  const std::vector<std::pair<std::string, std::string>> runs = {{"", "--workers 1"},
                                                                 {"/joined-nwords36", "--joined-dictionary --nwordssrc 36 --workers 3"}};
  for (const auto& [sub, flags] : runs) {
    const std::string out_dir = dir + "/out" + std::to_string(sub.size());
    std::string out;
    ASSERT_EQ(run_command(kCli + " fairseq-preprocess -s src -t tgt --trainpref " + kDir + "/text/train --validpref " +
                              kDir + "/text/valid --destdir " + out_dir + " " + flags,
                          out),
              0)
        << out;
    size_t compared = 0;
    for (const auto& e : std::filesystem::directory_iterator(kDir + sub)) {
      const auto ext = e.path().extension().string();
      if (ext != ".bin" && ext != ".idx" && ext != ".txt") continue;
      const auto name = e.path().filename().string();
      EXPECT_EQ(read_text(out_dir + "/" + name), read_text(e.path().string())) << sub << " " << name;
      ++compared;
    }
    EXPECT_EQ(compared, 10u) << sub;
  }
  std::string out;
  EXPECT_EQ(run_command(kCli + " fairseq-preprocess -s src -t tgt --trainpref " + kDir + "/text/train --destdir " + dir +
                            "/bad --dataset-impl lazy",
                        out),
            2);
  EXPECT_NE(out.find("--dataset-impl"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " fairseq-preprocess -s src -t tgt --trainpref " + dir + "/missing --destdir " + dir + "/bad",
                        out),
            1);
  EXPECT_NE(out.find("missing.src: file not found"), std::string::npos) << out;
}

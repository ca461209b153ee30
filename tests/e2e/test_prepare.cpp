// `leanseq prepare` at scale: memory that does not grow with the corpus, parallel encoders, exact
// duplicates left out, and training data split into shards that `train` reads one per epoch.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "e2e/task.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/indexed.h"

using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;
using leanseq::test::temp_dir;

// prepare streams its corpus: its own peak memory does not grow with the number of pairs (the
// SentencePiece trainer, a child process, samples a bounded number of sentences).
TEST(PrepareStream, MemoryDoesNotGrowWithTheCorpus) {
  const auto dir = temp_dir("prepare-memory");
  auto write = [&](const std::string& prefix, int n) {
    std::ofstream s(dir + "/" + prefix + ".src"), t(dir + "/" + prefix + ".tgt");
    for (int i = 0; i < n; ++i) {
      for (int w = 0; w < 12; ++w) s << (w ? " a" : "a") << (i * (w + 1)) % 20, t << (w ? " b" : "b") << (i * (w + 1)) % 20;
      s << "\n", t << "\n";
    }
  };
  write("small", 5000);
  write("large", 100000);
  write("valid", 100);
  const std::string flags = " --src src --tgt tgt --valid " + dir + "/valid --vocab-size 60";
  leanseq::test::expect_bounded_peak(kCli + " prepare --train " + dir + "/small --out " + dir + "/small-bin" + flags,
                                     kCli + " prepare --train " + dir + "/large --out " + dir + "/large-bin" + flags,
                                     {"5,000 pairs", "100,000 pairs"}, 48);
  EXPECT_EQ(leanseq::data::IndexedDataset(dir + "/large-bin/train.src").size(), 100000u);
}

// Encoders at once (--workers) write what one writes: the same dictionaries and ids, in order,
// across several chunks of lines.
TEST(PrepareStream, WorkersWriteTheSameFilesAsOne) {
  const auto dir = temp_dir("prepare-workers");
  {
    std::ofstream s(dir + "/train.src"), t(dir + "/train.tgt"), vs(dir + "/valid.src"), vt(dir + "/valid.tgt");
    for (int i = 0; i < 30000; ++i) {
      const int n = 1 + i % 9;
      for (int w = 0; w < n; ++w) s << (w ? " a" : "a") << (i * (w + 3)) % 23, t << (w ? " b" : "b") << (i * (w + 5)) % 23;
      s << "\n", t << "\n";
      if (i < 50) vs << "a" << i % 23 << "\n", vt << "b" << i % 23 << "\n";
    }
  }
  std::string out;
  const std::string flags = " prepare --src src --tgt tgt --train " + dir + "/train --valid " + dir + "/valid --vocab-size 60";
  ASSERT_EQ(run_command(kCli + flags + " --out " + dir + "/one", out), 0) << out;
  ASSERT_EQ(run_command(kCli + flags + " --out " + dir + "/three --spm-model " + dir + "/one/spm.model --workers 3", out), 0)
      << out;
  for (const char* f : {"dict.src.txt", "dict.tgt.txt", "train.src.bin", "train.src.idx", "train.tgt.bin", "train.tgt.idx",
                        "valid.src.bin", "valid.tgt.idx"}) {
    EXPECT_EQ(read_text(dir + "/one/" + f), read_text(dir + "/three/" + f)) << f;
  }
  EXPECT_NE(run_command(kCli + flags + " --out " + dir + "/bad --workers 0", out), 0);
  EXPECT_NE(out.find("--workers must be between 1 and 256"), std::string::npos) << out;
}

// --dedup leaves out every pair seen before (both sides equal; one side equal is not a duplicate),
// keeps the first of each, and says how many went.
TEST(PrepareDedup, ExactDuplicatePairsAreLeftOutOnce) {
  const auto dir = temp_dir("prepare-dedup");
  leanseq::test::write_task(dir + "/train", 300, 1);
  leanseq::test::write_task(dir + "/valid", 20, 2);
  const auto src = read_text(dir + "/train.src"), tgt = read_text(dir + "/train.tgt");
  auto first_lines = [](const std::string& text, int n) {
    size_t end = 0;
    for (int i = 0; i < n; ++i) end = text.find('\n', end) + 1;
    return text.substr(0, end);
  };
  // 40 pairs again, and 10 whose source repeats with another target (kept).
  std::ofstream(dir + "/train.src", std::ios::app) << first_lines(src, 40) << first_lines(src, 10);
  {
    std::ofstream t(dir + "/train.tgt", std::ios::app);
    t << first_lines(tgt, 40);
    for (int i = 0; i < 10; ++i) t << "b0 b1 b" << i << "\n";
  }
  const std::string flags = kCli + " prepare --src src --tgt tgt --train " + dir + "/train --valid " + dir +
                            "/valid --vocab-size 60 --max-ratio 0 --min-len 0";
  std::string out;
  ASSERT_EQ(run_command(flags + " --out " + dir + "/all", out), 0) << out;
  EXPECT_NE(out.find("train: 350 of 350 pairs kept"), std::string::npos) << out;
  ASSERT_EQ(run_command(flags + " --out " + dir + "/dedup --dedup --spm-model " + dir + "/all/spm.model", out), 0) << out;
  EXPECT_NE(out.find("train: 310 of 350 pairs kept (40 duplicates)"), std::string::npos) << out;
  EXPECT_NE(out.find("40 exact duplicate pairs left out"), std::string::npos) << out;
  // The kept pairs are the first 310 of the corpus, in order: the same pieces as the undeduplicated
  // run's first 300 and its last 10 (the ids differ: the counts, and so the dictionaries, do).
  leanseq::data::IndexedDataset all(dir + "/all/train.tgt"), dedup(dir + "/dedup/train.tgt");
  const auto all_dict = leanseq::data::Dictionary::load(dir + "/all/dict.tgt.txt");
  const auto dedup_dict = leanseq::data::Dictionary::load(dir + "/dedup/dict.tgt.txt");
  ASSERT_EQ(dedup.size(), 310u);
  for (size_t i = 0; i < 310; ++i) {
    ASSERT_EQ(dedup_dict.decode(dedup.get(i)), all_dict.decode(all.get(i < 300 ? i : i + 40))) << i;
  }
}

// --shard-size writes train in directories of that many pairs, each a whole prepared directory;
// train reads one shard per epoch, in turn (so its updates per epoch follow the shards' sizes),
// from the top directory or from a colon-separated list, and refuses shards that do not belong
// together.
TEST(PrepareShards, TrainReadsOneShardPerEpochInTurn) {
  const auto dir = temp_dir("prepare-shards");
  leanseq::test::write_task(dir + "/train", 250, 1);
  leanseq::test::write_task(dir + "/valid", 20, 2);
  std::string out;
  const std::string flags = kCli + " prepare --src src --tgt tgt --train " + dir + "/train --valid " + dir +
                            "/valid --vocab-size 60 --max-ratio 0 --min-len 0";
  ASSERT_EQ(run_command(flags + " --out " + dir + "/bin --shard-size 100", out), 0) << out;
  EXPECT_NE(out.find("train: 3 shards of at most 100 pairs"), std::string::npos) << out;
  const size_t sizes[] = {100, 100, 50};
  for (int k = 0; k < 3; ++k) {
    const auto shard = dir + "/bin/shard-00" + std::to_string(k);
    EXPECT_EQ(leanseq::data::IndexedDataset(shard + "/train.src").size(), sizes[k]) << shard;
    EXPECT_EQ(read_text(shard + "/dict.src.txt"), read_text(dir + "/bin/dict.src.txt")) << shard;
    EXPECT_TRUE(std::filesystem::exists(shard + "/valid.tgt.bin")) << shard;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/bin/train.src.bin"));
  // 10 sentences per batch: 10, 10, 5 and again 10 updates in four epochs.
  auto train = [&](const std::string& data, const std::string& save) {
    return run_command(kCli + " train --arch transformer_tiny --data " + data + " --save-dir " + dir + "/" + save +
                           " --max-epoch 4 --seed 1 --set batch.max_sentences=10 --set batch.max_tokens=100000"
                           " --log-format json",
                       out);
  };
  auto updates = [&] {
    static const std::regex re("\"update\":([0-9]+)");
    std::string last;
    for (auto it = std::sregex_iterator(out.begin(), out.end(), re);
         it != std::sregex_iterator(); ++it) {
      last = (*it)[1];
    }
    return last;
  };
  ASSERT_EQ(train(dir + "/bin", "top"), 0) << out;
  EXPECT_NE(out.find("training data in 3 shards"), std::string::npos) << out;
  EXPECT_EQ(updates(), "35") << out;
  const std::string list = dir + "/bin/shard-002:" + dir + "/bin/shard-000";
  ASSERT_EQ(train(list, "list"), 0) << out;  // 5, 10, 5, 10
  EXPECT_EQ(updates(), "30") << out;
  // A shard prepared on its own has another dictionary.
  leanseq::test::write_task(dir + "/other", 100, 7);
  ASSERT_EQ(run_command(kCli + " prepare --src src --tgt tgt --train " + dir + "/other --valid " + dir +
                            "/valid --vocab-size 50 --out " + dir + "/other-bin",
                        out),
            0)
      << out;
  EXPECT_EQ(train(dir + "/bin/shard-000:" + dir + "/other-bin", "bad"), 1) << out;
  EXPECT_NE(out.find("was prepared with other languages or dictionaries"), std::string::npos) << out;
  EXPECT_EQ(train(dir + "/bin/shard-000:", "bad"), 2) << out;
  EXPECT_NE(out.find("an empty path"), std::string::npos) << out;
}

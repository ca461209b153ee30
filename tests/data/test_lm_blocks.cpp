// fairseq's language-modeling blocks (TokenBlockDataset, LMContextWindowDataset) on a stream small
// enough to write out: 5 6 </s> | 7 </s> | 8 9 10 </s>.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "leanseq/core/error.h"
#include "leanseq/data/batching.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/lm_blocks.h"

using namespace leanseq;
using data::BreakMode;

namespace {
constexpr int64_t kEos = 2;
const std::vector<std::vector<int64_t>> kSentences = {{5, 6, kEos}, {7, kEos}, {8, 9, 10, kEos}};
using Ids = std::vector<int64_t>;
}  // namespace

TEST(LmBlocks, NoneCutsTheStreamAndShiftsItsInputsAcrossSentences) {
  const auto b = data::lm_blocks(kSentences, 4, BreakMode::none, kEos);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].target, (Ids{5, 6, kEos, 7}));
  EXPECT_EQ(b[0].source, (Ids{kEos, 5, 6, kEos}));
  EXPECT_EQ(b[1].target, (Ids{kEos, 8, 9, 10}));
  EXPECT_EQ(b[1].source, (Ids{7, kEos, 8, 9}));  // the token before, not </s>: mid-sentence
  EXPECT_EQ(b[2].target, (Ids{kEos}));
  EXPECT_EQ(b[2].source, (Ids{10}));
}

TEST(LmBlocks, CompleteAndEosKeepSentencesWhole) {
  const auto complete = data::lm_blocks(kSentences, 4, BreakMode::complete, kEos);
  ASSERT_EQ(complete.size(), 3u);  // 3 + 2 > 4: a block each; the 4-token sentence fills one
  EXPECT_EQ(complete[1].target, (Ids{7, kEos}));
  EXPECT_EQ(complete[1].source, (Ids{kEos, 7}));
  const auto pairs = data::lm_blocks(kSentences, 5, BreakMode::complete, kEos);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].target, (Ids{5, 6, kEos, 7, kEos}));
  const auto long_one = data::lm_blocks(kSentences, 2, BreakMode::complete, kEos);
  ASSERT_EQ(long_one.size(), 3u);  // a sentence longer than the block is a block alone
  EXPECT_EQ(long_one[2].target.size(), 4u);
  const auto eos = data::lm_blocks(kSentences, 1, BreakMode::eos, kEos);
  ASSERT_EQ(eos.size(), 3u);
  EXPECT_EQ(eos[2].source, (Ids{kEos, 8, 9, 10}));
}

TEST(LmBlocks, ContextWindowPrependsTheLastInputsWithinTheLimit) {
  auto b = data::lm_blocks(kSentences, 4, BreakMode::none, kEos);
  data::add_context_window(b, 2, 4);
  EXPECT_EQ(b[0].context, 0u);
  EXPECT_EQ(b[1].source, (Ids{6, kEos, 7, kEos, 8, 9}));
  EXPECT_EQ(b[1].context, 2u);
  EXPECT_EQ(b[2].source, (Ids{8, 9, 10}));
  EXPECT_EQ(b[2].target, (Ids{kEos}));
  // A block as long as the limit leaves room for less context.
  auto c = data::lm_blocks(kSentences, 4, BreakMode::none, kEos);
  data::add_context_window(c, 2, 3);  // at most 5 inputs
  EXPECT_EQ(c[1].context, 1u);
  EXPECT_EQ(c[1].source, (Ids{kEos, 7, kEos, 8, 9}));
}

TEST(LmBlocks, RefusesModesItDoesNotBuild) {
  EXPECT_THROW(data::parse_break_mode("complete_doc", "--sample-break-mode"), ConfigError);
  EXPECT_THROW(data::lm_blocks(kSentences, 0, BreakMode::none, kEos), ConfigError);
  EXPECT_EQ(data::parse_break_mode("eos", "x"), BreakMode::eos);
}

// Blocks as a training dataset: each target's decoder input is its block's input (the token before
// it in the text), not </s> and the target shifted; inputs of other lengths than their targets are
// refused.
TEST(LmBlocks, AsPairsTheDecoderInputIsTheBlocksInput) {
  const auto blocks = data::lm_blocks(kSentences, 4, BreakMode::none, kEos);
  data::IndexedWriter inputs, targets, sentences;
  for (const auto& b : blocks) inputs.add(b.source), targets.add(b.target);
  for (const auto& s : kSentences) sentences.add(s);
  const std::string dir = ::testing::TempDir() + "/lm-blocks-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  inputs.save(dir + "/x.in");
  targets.save(dir + "/x.out");
  sentences.save(dir + "/x.txt");
  auto ids = [](const torch::Tensor& t) {
    const auto c = t.contiguous().view(-1);
    return Ids(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  };
  const auto batch = data::PairDataset(dir + "/x.in", dir + "/x.out", true).batch({1});
  EXPECT_EQ(ids(batch.prev_output), (Ids{7, kEos, 8, 9}));
  EXPECT_EQ(ids(batch.target), (Ids{kEos, 8, 9, 10}));
  EXPECT_EQ(ids(data::PairDataset(dir + "/x.out", dir + "/x.out").batch({1}).prev_output), (Ids{kEos, kEos, 8, 9}));
  EXPECT_THROW(data::PairDataset(dir + "/x.in", dir + "/x.txt", true), DataError);
  std::filesystem::remove_all(dir);
}

// Without a length penalty a sentence's search ends at the first step whose best candidate ends in
// </s> (CTranslate2's early exit): nothing longer can beat it.
#include <gtest/gtest.h>

#include <cmath>

#include "leanseq/decode/beam_search.h"
#include "support/scripted_decoder.h"

using namespace leanseq;
using namespace leanseq::decode;

namespace {
using test::ScriptedDecoder;

// Vocabulary: 0 <s>, 1 <pad>, 2 </s>, 3 <unk>, 4 a, 5 b, 6 c. After the first </s> (the start):
// a 0.7, b 0.3; after a: </s> 0.6, c 0.4; after b: c 0.98; after c: </s> 0.99. At beam 2 the
// second step's best candidate is "a </s>" (log 0.42, over 2 tokens -0.434); the search that goes
// on finds "b c </s>" (log 0.291, over 3 tokens -0.411): better only once normalized by length.
torch::Tensor table() {
  const std::vector<std::vector<float>> p = {
      {0.2f, 0.f, 0.2f, 0.2f, 0.2f, 0.1f, 0.1f},     {0.2f, 0.f, 0.2f, 0.2f, 0.2f, 0.1f, 0.1f},
      {0.f, 0.f, 0.f, 0.f, 0.7f, 0.3f, 0.f},         {0.2f, 0.f, 0.2f, 0.2f, 0.2f, 0.1f, 0.1f},
      {0.f, 0.f, 0.6f, 0.f, 0.f, 0.f, 0.4f},         {0.f, 0.f, 0.02f, 0.f, 0.f, 0.f, 0.98f},
      {0.f, 0.f, 0.99f, 0.f, 0.f, 0.f, 0.01f},
  };
  return test::log_table(p);
}

SearchOptions beam2(double lenpen) {
  SearchOptions opt;
  opt.beam = 2;
  opt.max_len_b = 10;
  opt.lenpen = lenpen;
  return opt;
}
}  // namespace

// Without a length penalty, "a </s>" (log 0.42) beats anything longer: the search ends at the step
// it ends, with the best hypothesis the full search finds (nbest 2 makes it go on).
TEST(EarlyExit, WithoutALengthPenaltyTheSearchEndsWhereTheBestCandidateEnds) {
  ScriptedDecoder early(table()), full(table());
  const auto cut = beam_search(early, 1, 3, 1024, 7, beam2(0));
  auto two = beam2(0);
  two.nbest = 2;
  const auto all = beam_search(full, 1, 3, 1024, 7, two);
  ASSERT_EQ(cut[0].size(), 1u);
  ASSERT_EQ(all[0].size(), 2u);
  EXPECT_EQ(cut[0][0].tokens, (std::vector<int64_t>{4, 2}));  // a </s>
  EXPECT_EQ(cut[0][0].tokens, all[0][0].tokens);
  EXPECT_EQ(cut[0][0].score, all[0][0].score);
  EXPECT_EQ(cut[0][0].positional_scores, all[0][0].positional_scores);
  EXPECT_NEAR(cut[0][0].score, std::log(0.7 * 0.6), 1e-5);
  EXPECT_EQ(early.steps, 2);
  EXPECT_EQ(full.steps, 3);
}

// With one, a longer hypothesis can win once normalized: the search goes on until beam have ended.
TEST(EarlyExit, WithALengthPenaltyTheSearchGoesOn) {
  ScriptedDecoder dec(table());
  const auto res = beam_search(dec, 1, 3, 1024, 7, beam2(1));
  ASSERT_EQ(res[0].size(), 2u);
  EXPECT_EQ(res[0][0].tokens, (std::vector<int64_t>{5, 6, 2}));  // b c </s>
  EXPECT_NEAR(res[0][0].score, std::log(0.3 * 0.98 * 0.99) / 3, 1e-5);
  EXPECT_EQ(dec.steps, 3);
}

// CTranslate2's search (its models') ends so for any nbest, once nbest hypotheses have ended; a
// negative <unk> penalty, which can raise a score, keeps the full search.
TEST(EarlyExit, CTranslate2sSearchWaitsForNbestAndANegativeUnkPenaltyGoesOn) {
  auto opt = beam2(0);
  opt.max_len_cuts = true;
  opt.nbest = 2;
  ScriptedDecoder ct2(table());
  const auto res = beam_search(ct2, 1, 3, 1024, 7, opt);
  ASSERT_GE(res[0].size(), 2u);
  EXPECT_EQ(res[0][0].tokens, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(ct2.steps, 3);
  opt = beam2(0);
  opt.unk_penalty = -1;
  ScriptedDecoder unk(table());
  beam_search(unk, 1, 3, 1024, 7, opt);
  EXPECT_EQ(unk.steps, 3);
}

// A sentence in a batch ends on its own, with what it gets searched alone.
TEST(EarlyExit, EachSentenceOfABatchEndsOnItsOwn) {
  ScriptedDecoder batch(table()), alone(table());
  const auto together = beam_search(batch, 2, 3, 1024, 7, beam2(0));
  const auto one = beam_search(alone, 1, 3, 1024, 7, beam2(0));
  for (const auto& hyps : together) {
    ASSERT_EQ(hyps.size(), one[0].size());
    EXPECT_EQ(hyps[0].tokens, one[0][0].tokens);
    EXPECT_EQ(hyps[0].score, one[0][0].score);
  }
  EXPECT_EQ(batch.steps, alone.steps);
}

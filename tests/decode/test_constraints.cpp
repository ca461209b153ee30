// The moves of a hypothesis through its constraints, against fairseq 0.12.2's own
// OrderedConstraintState and UnorderedConstraintState: the bank, whether it has finished and the
// next tokens after each token of a stream. The expectations were printed by fairseq's
// token_generation_constraints.py (pack_constraints, create, advance) for these constraints and
// streams; sets are listed ascending and without repeats.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>

#include "leanseq/core/error.h"
#include "leanseq/decode/beam_search.h"
#include "leanseq/decode/constraints.h"

using leanseq::decode::Candidate;
using leanseq::decode::ConstraintOrder;
using leanseq::decode::ConstraintTracker;

namespace {

struct After {
  int64_t bank;
  bool finished;
  std::vector<int64_t> next;
};

struct Case {
  ConstraintOrder order;
  leanseq::decode::Constraints constraints;
  std::vector<int64_t> stream;
  std::vector<After> expected;
};

constexpr auto ordered = ConstraintOrder::ordered;
constexpr auto unordered = ConstraintOrder::unordered;

const std::vector<Case> kCases = {
    {ordered, {{5, 6}, {7}}, {5, 6, 9, 7, 8}, {{1, 0, {6}}, {2, 0, {5, 7}}, {2, 0, {5, 7}}, {3, 1, {5}}, {3, 1, {5}}}},
    {unordered, {{5, 6}, {7}}, {5, 6, 9, 7, 8}, {{1, 0, {5, 6, 7}}, {2, 0, {5, 7}}, {2, 0, {5, 7}}, {3, 1, {5, 7}}, {3, 1, {5, 7}}}},
    {ordered, {{5, 6}, {7}}, {7, 5, 9, 5, 6}, {{0, 0, {5}}, {1, 0, {6}}, {0, 0, {5}}, {1, 0, {6}}, {2, 0, {5, 7}}}},
    {unordered, {{5, 6}, {7}}, {7, 5, 9, 5, 6}, {{1, 0, {5, 7}}, {2, 0, {5, 6, 7}}, {1, 0, {5, 7}}, {2, 0, {5, 6, 7}}, {3, 1, {5, 7}}}},
    {ordered, {{5, 6}, {5, 6, 8}}, {5, 6, 8, 5, 6}, {{1, 0, {6}}, {2, 0, {5}}, {2, 0, {5}}, {3, 0, {5, 6}}, {4, 0, {5, 8}}}},
    {unordered, {{5, 6}, {5, 6, 8}}, {5, 6, 8, 5, 6}, {{1, 0, {5, 6}}, {2, 0, {5, 8}}, {3, 0, {5}}, {4, 0, {5, 6}}, {5, 1, {5, 8}}}},
    {ordered, {{5, 6}, {5, 6, 8}}, {5, 6, 9, 5, 6, 8},
     {{1, 0, {6}}, {2, 0, {5}}, {2, 0, {5}}, {3, 0, {5, 6}}, {4, 0, {5, 8}}, {5, 1, {5}}}},
    {unordered, {{5, 6}, {5, 6, 8}}, {5, 6, 9, 5, 6, 8},
     {{1, 0, {5, 6}}, {2, 0, {5, 8}}, {2, 0, {5}}, {3, 0, {5, 6}}, {4, 0, {5, 8}}, {5, 1, {5}}}},
    {ordered, {{4}, {4}, {9, 4}}, {4, 9, 4, 4}, {{1, 0, {4}}, {1, 0, {4}}, {2, 0, {4, 9}}, {2, 0, {4, 9}}}},
    {unordered, {{4}, {4}, {9, 4}}, {4, 9, 4, 4}, {{1, 0, {4, 9}}, {2, 0, {4, 9}}, {3, 0, {4, 9}}, {4, 1, {4, 9}}}},
};

}  // namespace

TEST(Constraints, StatesMoveAsFairseqs) {
  for (size_t c = 0; c < kCases.size(); ++c) {
    const auto& k = kCases[c];
    ConstraintTracker tracker(k.constraints, k.order);
    auto state = tracker.start();
    EXPECT_FALSE(tracker.finished(state)) << "case " << c;
    EXPECT_EQ(tracker.bank(state), 0) << "case " << c;
    for (size_t i = 0; i < k.stream.size(); ++i) {
      state = tracker.advance(state, k.stream[i]);
      EXPECT_EQ(tracker.bank(state), k.expected[i].bank) << "case " << c << " token " << i;
      EXPECT_EQ(tracker.finished(state), k.expected[i].finished) << "case " << c << " token " << i;
      EXPECT_EQ(tracker.next_tokens(state), k.expected[i].next) << "case " << c << " token " << i;
    }
  }
}

TEST(Constraints, NoConstraintsAreMetAtOnce) {
  for (auto order : {ordered, unordered}) {
    ConstraintTracker tracker({}, order);
    const auto s = tracker.advance(tracker.start(), 7);
    EXPECT_TRUE(tracker.finished(tracker.start()));
    EXPECT_TRUE(tracker.finished(s));
    EXPECT_EQ(tracker.bank(s), 0);
    EXPECT_TRUE(tracker.next_tokens(s).empty());
    EXPECT_EQ(tracker.key_tokens(), 0);
  }
}

// fairseq's sort key counts every occurrence of an ordered constraint's tokens, distinct ones of
// unordered constraints.
TEST(Constraints, KeyTokensCountAsFairseqsSets) {
  EXPECT_EQ(ConstraintTracker({{4}, {4}, {9, 4}}, ordered).key_tokens(), 4);
  EXPECT_EQ(ConstraintTracker({{4}, {4}, {9, 4}}, unordered).key_tokens(), 2);
}

TEST(Constraints, RefusesAnEmptyConstraintAndTooManyTokens) {
  EXPECT_THROW(ConstraintTracker({{5}, {}}, ordered), leanseq::DataError);
  EXPECT_THROW(ConstraintTracker({std::vector<int64_t>(leanseq::decode::kMaxConstraintTokens + 1, 5)}, unordered),
               leanseq::DataError);
  EXPECT_NO_THROW(ConstraintTracker({std::vector<int64_t>(leanseq::decode::kMaxConstraintTokens, 5)}, unordered));
}

// One sentence's step: candidates that meet a constraint token are dealt out before better ones of
// a lower bank, a bank at a time, duplicates dropped, and the count kept.
TEST(Constraints, CandidatesAreDealtRoundRobinOverTheBanks) {
  ConstraintTracker tracker({{7}}, ordered);  // key tokens 1
  const int64_t vocab = 10;
  std::vector<float> lprobs(2 * vocab, -9.0f);
  lprobs[0 * vocab + 4] = -1.0f, lprobs[0 * vocab + 5] = -1.5f, lprobs[0 * vocab + 7] = -6.0f;
  lprobs[1 * vocab + 4] = -2.0f, lprobs[1 * vocab + 7] = -3.0f;
  const std::vector<ConstraintTracker::State> rows(2, tracker.start());
  // The best of the beam, then each row's best (row 0's 4 again: a duplicate).
  std::vector<Candidate> cands = {{-1.0f, 0, 4}, {-1.5f, 0, 5}, {-2.0f, 1, 4}, {-1.0f, 0, 4}, {-2.0f, 1, 4}};
  std::vector<ConstraintTracker::State> states;
  const auto out = leanseq::decode::constrained_candidates(tracker, rows, cands, lprobs.data(), vocab, 1, 4, &states);
  ASSERT_EQ(out.size(), 4u);
  ASSERT_EQ(states.size(), 4u);
  // Bank 1 (token 7, added from each row) first, its best; then bank 0's best; then bank 1's second...
  const std::vector<std::pair<int64_t, int64_t>> rows_tokens = {{1, 7}, {0, 4}, {0, 7}, {0, 5}};
  for (size_t k = 0; k < out.size(); ++k) {
    EXPECT_EQ(out[k].row, rows_tokens[k].first) << k;
    EXPECT_EQ(out[k].token, rows_tokens[k].second) << k;
  }
  EXPECT_FLOAT_EQ(out[0].score, -3.0f);
  EXPECT_FLOAT_EQ(out[2].score, -6.0f);
  EXPECT_TRUE(tracker.finished(states[0]));
  EXPECT_FALSE(tracker.finished(states[1]));
}

namespace {
// A decoder whose every step has the same distribution over 8 tokens: 4 likely, </s> next, then 5,
// 6 and 7 rarely.
class SameEveryStep : public leanseq::decode::StepDecoder {
 public:
  torch::Tensor step(const torch::Tensor& last, torch::Tensor*) override {
    const auto row = torch::tensor({0.0f, 0.0f, 0.3f, 0.0f, 0.5f, 0.1f, 0.05f, 0.05f}).log();
    return row.unsqueeze(0).expand({last.size(0), 8}).clone();
  }
  void reorder(const torch::Tensor&, bool) override {}
};

bool contains(const std::vector<int64_t>& tokens, const std::vector<int64_t>& part) {
  return std::search(tokens.begin(), tokens.end(), part.begin(), part.end()) != tokens.end();
}
}  // namespace

TEST(Constraints, EveryHypothesisHoldsItsConstraintsAndEndsAfterThem) {
  SameEveryStep dec;
  leanseq::decode::SearchOptions opt;
  opt.beam = 3;
  opt.nbest = 3;
  opt.max_len_b = 10;
  opt.constraint_order = ordered;
  const std::vector<leanseq::decode::Constraints> two = {{{6, 7}}, {{5}, {7}}};
  auto hyps = leanseq::decode::beam_search(dec, 2, 3, 1024, 8, opt, nullptr, nullptr, &two);
  ASSERT_EQ(hyps.size(), 2u);
  for (const auto& h : hyps[0]) EXPECT_TRUE(contains(h.tokens, {6, 7}));
  for (const auto& h : hyps[1]) {
    const auto five = std::find(h.tokens.begin(), h.tokens.end(), 5);
    ASSERT_NE(five, h.tokens.end());
    EXPECT_NE(std::find(five, h.tokens.end(), 7), h.tokens.end());  // 7 after 5: ordered
  }
  // Unordered: both, in either order; without constraints the best has neither.
  opt.constraint_order = unordered;
  const std::vector<leanseq::decode::Constraints> any = {{{7}, {6}}};
  hyps = leanseq::decode::beam_search(dec, 1, 3, 1024, 8, opt, nullptr, nullptr, &any);
  for (const auto& h : hyps[0]) {
    EXPECT_TRUE(contains(h.tokens, {6}) && contains(h.tokens, {7}));
  }
  opt.constraint_order = ConstraintOrder::none;
  hyps = leanseq::decode::beam_search(dec, 1, 3, 1024, 8, opt);
  EXPECT_FALSE(contains(hyps[0][0].tokens, {6}) || contains(hyps[0][0].tokens, {7}));
}

// Constraints that cannot be met within max_len end the sentence there unconstrained (fairseq
// stops with an AssertionError).
TEST(Constraints, UnmetConstraintsEndAtMaxLen) {
  SameEveryStep dec;
  leanseq::decode::SearchOptions opt;
  opt.beam = 2;
  opt.max_len_b = 2;
  opt.constraint_order = ordered;
  const std::vector<leanseq::decode::Constraints> long_one = {{{6, 7, 6, 7}}};
  const auto hyps = leanseq::decode::beam_search(dec, 1, 3, 1024, 8, opt, nullptr, nullptr, &long_one);
  ASSERT_FALSE(hyps[0].empty());
  EXPECT_EQ(hyps[0][0].tokens.size(), 3u);  // max_len tokens and </s>
  EXPECT_EQ(hyps[0][0].tokens.back(), 2);
}

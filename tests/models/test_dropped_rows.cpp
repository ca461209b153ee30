// Sentences that leave a batch of beams: the encoder output and the encoder-side attention caches
// keep the other sentences' rows by moving them up in their own storage (nn::keep_rows_in_place),
// with the values index_select gives, and fall back to index_select wherever moving them in place
// would be wrong (shared storage, rows out of order, groups that are not copies).
#include <gtest/gtest.h>

#include "leanseq/models/seq2seq.h"
#include "leanseq/nn/attention.h"
#include "leanseq/nn/incremental_state.h"

using namespace leanseq;

namespace {
torch::Tensor rows(std::initializer_list<int64_t> r) { return torch::tensor(std::vector<int64_t>(r), torch::kLong); }
}  // namespace

TEST(DroppedRows, KeptInPlaceAsIndexSelectWouldWithoutANewBuffer) {
  torch::manual_seed(41);
  for (int64_t group : {1, 3}) {
    auto t = torch::randn({4 * group, 2, 5, 3});
    auto blocks = rows({1, 3});
    auto expected = t.index_select(0, torch::arange(4 * group).view({4, group}).index_select(0, blocks).flatten());
    const void* before = t.data_ptr();
    ASSERT_TRUE(nn::keep_rows_in_place(t, blocks, group)) << group;
    EXPECT_EQ(t.data_ptr(), before) << "the same storage, narrowed";
    EXPECT_EQ(t.size(0), 2 * group);
    EXPECT_TRUE(torch::equal(t, expected)) << group;
  }
}

TEST(DroppedRows, RefusedWhereMovingRowsWouldBeWrongAndNothingChanges) {
  torch::manual_seed(42);
  auto t = torch::randn({4, 3});
  const auto copy = t.clone();
  EXPECT_FALSE(nn::keep_rows_in_place(t, rows({2, 1}))) << "rows out of order";
  EXPECT_FALSE(nn::keep_rows_in_place(t, rows({1, 1}))) << "a row twice";
  EXPECT_FALSE(nn::keep_rows_in_place(t, rows({0, 4}))) << "past the end";
  EXPECT_FALSE(nn::keep_rows_in_place(t, rows({0, 1}), 3)) << "groups that do not divide the rows";
  {
    auto view = t.narrow(1, 0, 2);  // another tensor on the same storage
    EXPECT_FALSE(nn::keep_rows_in_place(t, rows({1, 3})));
  }
  {
    auto alias = t;  // the same tensor held twice
    EXPECT_FALSE(nn::keep_rows_in_place(t, rows({1, 3})));
  }
  auto strided = torch::randn({4, 6}).narrow(1, 0, 3);  // a view, whose rows are not dense blocks
  EXPECT_FALSE(nn::keep_rows_in_place(strided, rows({1, 3})));
  auto transposed = torch::randn({4, 3, 2}).transpose(1, 2);  // a view: its base holds the storage too
  EXPECT_FALSE(nn::keep_rows_in_place(transposed, rows({1, 3})));
  EXPECT_TRUE(torch::equal(t, copy));
  EXPECT_TRUE(nn::keep_rows_in_place(t, rows({1, 3})));
  EXPECT_TRUE(torch::equal(t, copy.index_select(0, rows({1, 3}))));
}

TEST(DroppedRows, GroupedSourcesNameTheOldGroupOfEachNewOne) {
  EXPECT_TRUE(torch::equal(nn::grouped_sources(rows({5, 4, 1, 0}), 2, 2), rows({2, 0})));
  EXPECT_TRUE(torch::equal(nn::grouped_sources(rows({0, 0, 2, 2}), 1, 2), rows({0, 2})));
  EXPECT_FALSE(nn::grouped_sources(rows({5, 2, 1, 0}), 2, 2).defined()) << "a new group from two old ones";
  EXPECT_FALSE(nn::grouped_sources(rows({0, 1, 2}), 1, 2).defined()) << "rows not a whole number of groups";
  EXPECT_FALSE(nn::grouped_sources(rows({0, 1}), 1, 1).defined()) << "no groups";
}

// The beam search's encoder output: expanded to `beam` copies per sentence, then sentences drop
// out; each drop keeps the others' rows in place and equal to index_select's, and an order that
// breaks the groups of copies ends the grouping.
TEST(DroppedRows, EncoderOutKeepsTheRemainingSentencesInPlace) {
  torch::manual_seed(43);
  models::EncoderOut enc;
  enc.out = torch::randn({3, 4, 8});
  enc.padding_mask = torch::rand({3, 4}).gt(0.7);
  auto reference_out = enc.out.clone(), reference_mask = enc.padding_mask.clone();
  auto select = [&](const torch::Tensor& order) {
    reference_out = reference_out.index_select(0, order);
    reference_mask = reference_mask.index_select(0, order);
  };
  auto expand = rows({0, 0, 1, 1, 2, 2});
  enc.reorder(expand, 2);
  select(expand);
  EXPECT_EQ(enc.rows, 2);
  const void* storage = enc.out.data_ptr();
  auto drop = rows({1, 0, 5, 5});  // the second sentence finished; the others' beams change
  enc.reorder(drop, 2);
  select(drop);
  EXPECT_EQ(enc.out.data_ptr(), storage) << "kept in place";
  EXPECT_TRUE(torch::equal(enc.out, reference_out));
  EXPECT_TRUE(torch::equal(enc.padding_mask, reference_mask));
  auto broken = rows({1});
  enc.reorder(broken, 2);
  select(broken);
  EXPECT_EQ(enc.rows, 1);
  EXPECT_TRUE(torch::equal(enc.out, reference_out));
  EXPECT_TRUE(torch::equal(enc.padding_mask, reference_mask));
}

// Encoder-side attention with one copy per sentence: a drop in order moves the keys and values in
// place, and attention after it is what a fresh cache of the remaining sentences gives.
TEST(DroppedRows, StaticAttentionKeepsTheRemainingSourcesInPlace) {
  torch::manual_seed(44);
  torch::NoGradGuard no_grad;
  nn::MultiheadAttention att(16, 4, 0.0, true);
  att->eval();
  auto sources = torch::randn({3, 5, 16});
  auto padding = torch::zeros({3, 5}, torch::kBool);
  padding[2][4] = true;
  nn::IncrementalState state;
  state.rows_per_source = 2;
  auto memory = sources.repeat_interleave(2, 0), memory_padding = padding.repeat_interleave(2, 0);
  auto& cache = state.get<nn::StaticAttentionCache>("a");
  att->step_static(torch::randn({6, 1, 16}), memory, memory_padding, cache, false);
  const void* keys = cache.k.data_ptr();
  state.reorder(rows({3, 2, 4, 5}), false);  // the first sentence finished
  EXPECT_EQ(cache.k.data_ptr(), keys) << "kept in place";
  EXPECT_EQ(cache.k.size(0), 2);
  nn::IncrementalState fresh;
  fresh.rows_per_source = 2;
  auto kept = rows({2, 3, 4, 5});
  auto q = torch::randn({4, 1, 16});
  auto a = att->step_static(q, memory, memory_padding, cache, true);
  auto b = att->step_static(q, memory.index_select(0, kept), memory_padding.index_select(0, kept),
                            fresh.get<nn::StaticAttentionCache>("a"), true);
  EXPECT_TRUE(torch::equal(a.out, b.out));
  EXPECT_TRUE(torch::equal(a.weights, b.weights));
}

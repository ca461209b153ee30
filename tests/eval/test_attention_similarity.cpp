// Jensen-Shannon similarity of attention distributions and SAN's greedy grouping of layers.
#include <gtest/gtest.h>

#include "leanseq/eval/attention_similarity.h"

using namespace leanseq::eval;

TEST(AttentionSimilarity, JensenShannonOfIdenticalIsZeroAndOfDisjointIsOne) {
  torch::manual_seed(0);
  auto p = torch::softmax(torch::randn({3, 2, 7}), -1);
  EXPECT_EQ(jensen_shannon(p, p).abs().max().item<double>(), 0.0);
  auto a = torch::tensor({1.0, 0.0, 0.0, 0.0}), b = torch::tensor({0.0, 0.0, 0.5, 0.5});
  EXPECT_NEAR(jensen_shannon(a, b).item<double>(), 1.0, 1e-12);
  // A known value: JSD([1, 0], [0.5, 0.5]) = 1 - 0.75 log2(4/3)... computed from the definition.
  auto u = torch::tensor({1.0, 0.0}), v = torch::tensor({0.5, 0.5});
  const double m0 = 0.75, m1 = 0.25;
  const double expected = 0.5 * (1.0 * std::log2(1.0 / m0)) + 0.5 * (0.5 * std::log2(0.5 / m0) + 0.5 * std::log2(0.5 / m1));
  EXPECT_NEAR(jensen_shannon(u, v).item<double>(), expected, 1e-12);
  auto q = torch::softmax(torch::randn({3, 2, 7}), -1);
  EXPECT_LT((jensen_shannon(p, q) - jensen_shannon(q, p)).abs().max().item<double>(), 1e-12);
}

TEST(AttentionSimilarity, LayerMatrixAveragesOverValidPositions) {
  torch::manual_seed(1);
  auto p = torch::softmax(torch::randn({2, 3, 4, 5}), -1);
  auto q = torch::softmax(torch::randn({2, 3, 4, 5}), -1);
  auto valid = torch::ones({2, 4}, torch::kBool);
  valid[1][3] = false;
  LayerSimilarity sim(3);
  // Invalid positions must not count: make them differ wildly in layer 2 only there.
  auto q2 = p.clone();
  q2[1].select(1, 3).copy_(torch::tensor({1.0f, 0.f, 0.f, 0.f, 0.f}).expand({3, 5}));
  sim.add({p, q, q2}, valid);
  auto m = sim.matrix();
  EXPECT_EQ(sim.positions(), 3 * 7);
  EXPECT_DOUBLE_EQ(m[0][0], 1.0);
  EXPECT_NEAR(m[0][2], 1.0, 1e-12);  // identical where it counts
  auto w = valid.to(torch::kDouble).unsqueeze(1);
  const double expected = ((1 - jensen_shannon(p, q)) * w).sum().item<double>() / 21;
  EXPECT_NEAR(m[0][1], expected, 1e-12);
  EXPECT_DOUBLE_EQ(m[0][1], m[1][0]);
}

TEST(AttentionSimilarity, GreedyBlocksFollowTheThreshold) {
  // Layers 0-1 alike, 2-4 alike (2 and 4 are close, 3 is close to 2), 5 alone.
  Matrix s = {{1.0, 0.9, 0.5, 0.4, 0.4, 0.3}, {0.9, 1.0, 0.6, 0.5, 0.4, 0.3}, {0.5, 0.6, 1.0, 0.85, 0.8, 0.4},
              {0.4, 0.5, 0.85, 1.0, 0.9, 0.5}, {0.4, 0.4, 0.8, 0.9, 1.0, 0.7}, {0.3, 0.3, 0.4, 0.5, 0.7, 1.0}};
  using B = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(propose_blocks(s, 0.8), (B{{0, 1}, {2, 4}, {5, 5}}));
  EXPECT_EQ(propose_blocks(s, 0.82), (B{{0, 1}, {2, 3}, {4, 4}, {5, 5}}));  // 4 is 0.8 from its block's first
  EXPECT_EQ(propose_blocks(s, 0.95), (B{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}}));
  EXPECT_EQ(propose_blocks(s, 0.0), (B{{0, 5}}));
  EXPECT_TRUE(propose_blocks({}, 0.5).empty());
}

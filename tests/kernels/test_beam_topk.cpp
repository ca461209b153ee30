#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "leanseq/core/threads.h"
#include "leanseq/kernels/beam_topk.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();

void expect_same_top(const torch::Tensor& lp, const torch::Tensor& scores, int64_t k, const std::string& what) {
  auto [v, i] = kernels::beam_topk(lp, scores, k);
  auto [rv, ri] = kernels::beam_topk_reference(lp, scores, k);
  EXPECT_TRUE(torch::equal(v, rv)) << what;
  EXPECT_TRUE(torch::equal(i, ri)) << what;
}
}  // namespace

// Against torch::topk of the sum, on distinct values (ATen leaves the order of ties open): log-
// probabilities of several vocabulary sizes (not multiples of the block), -inf columns as the
// beam search sets them (pad, a minimum length's </s>), rows of one sentence far apart, the first
// step's single beam (a strided view), and k up to the whole.
TEST(BeamTopk, EqualsTopkOfTheSum) {
  torch::manual_seed(21);
  torch::NoGradGuard no_grad;
  for (int64_t V : {7, 64, 1000, 8003}) {
    for (int64_t beam : {1, 5}) {
      auto lp = torch::log_softmax(torch::randn({9, beam, V}) * 3, -1);
      lp.select(2, 1).fill_(-kInf);
      auto scores = torch::randn({9, beam}) * 4 - 10;
      const int64_t k = std::min<int64_t>(2 * beam, beam * V - 1);
      expect_same_top(lp, scores, k, "V=" + std::to_string(V) + " beam=" + std::to_string(beam));
      expect_same_top(lp, {}, k, "no scores, V=" + std::to_string(V));
      auto wide = torch::log_softmax(torch::randn({3, 4, V}), -1);
      expect_same_top(wide.narrow(1, 0, 1), {}, std::min<int64_t>(10, V - 1), "first step's view");
    }
  }
  auto small = torch::randn({2, 3, 5});
  expect_same_top(small, torch::randn({2, 3}), 15, "k = every candidate");
}

// Ties: the lower index first (the order a left-to-right scan gives, stable across runs and thread
// counts), -inf candidates included when fewer numbers remain (a step at the maximum length keeps
// only </s>), and NaN above every number, as in ATen's ordering.
TEST(BeamTopk, TiesGoToTheLowerIndexAndNanRanksFirst) {
  auto lp = torch::full({1, 2, 100}, -kInf);
  lp[0][0][2] = -1.f, lp[0][1][2] = -1.f, lp[0][1][70] = -0.5f;
  auto [v, i] = kernels::beam_topk(lp, torch::zeros({1, 2}), 5);
  EXPECT_EQ(std::vector<float>(v.data_ptr<float>(), v.data_ptr<float>() + 5),
            std::vector<float>({-0.5f, -1.f, -1.f, -kInf, -kInf}));
  EXPECT_EQ(std::vector<int64_t>(i.data_ptr<int64_t>(), i.data_ptr<int64_t>() + 5),
            std::vector<int64_t>({170, 2, 102, 0, 1}));
  auto nan = torch::randn({1, 1, 300});
  nan[0][0][250] = std::numeric_limits<float>::quiet_NaN();
  auto [nv, ni] = kernels::beam_topk(nan, {}, 3);
  EXPECT_TRUE(std::isnan(nv[0][0].item<float>()));
  EXPECT_EQ(ni[0][0].item<int64_t>(), 250);
  auto numbers = nan.clone();
  numbers[0][0][250] = -kInf;
  EXPECT_EQ(ni[0][1].item<int64_t>(), numbers.argmax().item<int64_t>());
}

// A sentence's candidates do not depend on the others in the batch or on the thread count.
TEST(BeamTopk, ASentenceGetsTheSameCandidatesAloneOrBatchedOnAnyThreadCount) {
  torch::manual_seed(22);
  auto lp = torch::log_softmax(torch::randn({64, 5, 8000}), -1);
  auto scores = torch::randn({64, 5});
  const int before = torch::get_num_threads();
  set_compute_threads(1);
  auto one = kernels::beam_topk(lp, scores, 10);
  set_compute_threads(2);
  auto two = kernels::beam_topk(lp, scores, 10);
  set_compute_threads(before);
  EXPECT_TRUE(torch::equal(std::get<1>(one), std::get<1>(two)));
  auto alone = kernels::beam_topk(lp.narrow(0, 40, 1), scores.narrow(0, 40, 1), 10);
  EXPECT_TRUE(torch::equal(std::get<1>(alone), std::get<1>(two).narrow(0, 40, 1)));
  EXPECT_TRUE(torch::equal(std::get<0>(alone), std::get<0>(two).narrow(0, 40, 1)));
}

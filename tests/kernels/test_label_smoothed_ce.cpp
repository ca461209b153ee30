#include <gtest/gtest.h>

#include "leanseq/kernels/label_smoothed_ce.h"
#include "leanseq/train/criterion.h"

using namespace leanseq;

TEST(LabelSmoothedCE, AgreesWithTheReferenceForwardAndBackward) {
  torch::manual_seed(3);
  for (int64_t V : {5, 37, 1000}) {
    const int64_t N = 300;
    auto logits = (torch::randn({N, V}) * 3).requires_grad_(true);
    auto target = torch::randint(0, V, {N}, torch::kLong);
    target.narrow(0, 0, 20).fill_(1);  // ignored rows
    auto ref = train::label_smoothed_nll_loss(torch::log_softmax(logits, -1), target, 0.1, 1);
    // A scaled loss, and (every other size) an unscaled one, whose gradient is passed on as it is.
    auto g = V == 37 ? torch::ones({}) : torch::randn({});
    (ref.loss * g).backward();
    auto ref_grad = logits.grad().clone();
    logits.mutable_grad().reset();
    auto fused = kernels::label_smoothed_cross_entropy(logits, target, 0.1, 1);
    (fused.loss * g).backward();
    EXPECT_NEAR(fused.loss.item<double>(), ref.loss.item<double>(), 1e-4 * std::abs(ref.loss.item<double>()));
    EXPECT_NEAR(fused.nll.item<double>(), ref.nll_loss.item<double>(), 1e-4 * std::abs(ref.nll_loss.item<double>()));
    EXPECT_LT((logits.grad() - ref_grad).abs().max().item<double>(), 1e-5) << "V=" << V;
    EXPECT_EQ(logits.grad().narrow(0, 0, 20).abs().sum().item<double>(), 0.0);
  }
}

// bfloat16 logits (CPU autocast) give the losses of their float32 widening and the gradient that
// a cast to float32 in front of the loss would hand back, bit for bit; ignored rows get zeros.
TEST(LabelSmoothedCE, BfloatLogitsAreTheirFloatWideningWithTheGradientRoundedOnce) {
  torch::manual_seed(4);
  const int64_t N = 130, V = 1000;
  auto base = (torch::randn({N, V}) * 3).to(torch::kBFloat16);
  auto target = torch::randint(0, V, {N}, torch::kLong);
  target.narrow(0, 0, 7).fill_(1);
  auto cast = base.clone().requires_grad_(true);
  auto want = kernels::label_smoothed_cross_entropy(cast.to(torch::kFloat), target, 0.1, 1);
  want.loss.backward();
  auto direct = base.clone().requires_grad_(true);
  auto got = kernels::label_smoothed_cross_entropy(direct, target, 0.1, 1);
  got.loss.backward();
  EXPECT_EQ(got.loss.item<float>(), want.loss.item<float>());
  EXPECT_EQ(got.nll.item<float>(), want.nll.item<float>());
  ASSERT_EQ(direct.grad().scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(direct.grad().equal(cast.grad()));
  EXPECT_EQ(direct.grad().narrow(0, 0, 7).to(torch::kFloat).abs().sum().item<double>(), 0.0);
}

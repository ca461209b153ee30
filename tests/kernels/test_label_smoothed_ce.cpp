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

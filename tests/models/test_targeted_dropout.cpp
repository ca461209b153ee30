// Targeted Dropout and magnitude pruning: which weights are targeted, that only those are
// dropped, that the in-place mechanism has the gradient of W * mask, and exact sparsities.
#include <gtest/gtest.h>

#include "leanseq/core/error.h"
#include "leanseq/nn/linear.h"
#include "leanseq/nn/targeted_dropout.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
struct TwoLayers : torch::nn::Module {
  TwoLayers() {
    embed_tokens = register_module("embed_tokens", torch::nn::Embedding(10, 6));
    fc1 = register_module("fc1", nn::make_linear(6, 8));
    fc2 = register_module("fc2", nn::make_linear(8, 4));
  }
  torch::Tensor forward(const torch::Tensor& tokens) { return fc2(torch::relu(fc1(embed_tokens(tokens)))); }
  torch::nn::Embedding embed_tokens{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
}  // namespace

TEST(TargetedDropout, WeightMaskTargetsTheSmallestMagnitudesOfEachUnit) {
  auto w = torch::tensor({{0.5, -0.1, 2.0, 0.3}, {-3.0, 1.0, 0.2, -0.05}});
  auto m = nn::targeted_weight_mask(w, 0.5);
  EXPECT_TRUE(m.equal(torch::tensor({{false, true, false, true}, {false, false, true, true}})));
  EXPECT_EQ(nn::targeted_weight_mask(w, 0.0).sum().item<int64_t>(), 0);
  EXPECT_EQ(nn::targeted_weight_mask(w, 1.0).sum().item<int64_t>(), 8);
  // A 3-D kernel is [units, ...]: each unit's 6 weights, floor(0.34 * 6) = 2 of them.
  auto k = torch::randn({3, 2, 3});
  auto mk = nn::targeted_weight_mask(k, 0.34);
  for (int64_t u = 0; u < 3; ++u) EXPECT_EQ(mk[u].sum().item<int64_t>(), 2);
}

TEST(TargetedDropout, UnitMaskTargetsTheUnitsOfSmallestNorm) {
  auto w = torch::tensor({{1.0, 1.0}, {0.1, 0.1}, {3.0, 0.0}, {0.2, -0.3}});
  auto m = nn::targeted_unit_mask(w, 0.5);
  EXPECT_TRUE(m.select(1, 0).equal(torch::tensor({false, true, false, true})));
  EXPECT_TRUE(m.select(1, 0).equal(m.select(1, 1)));
}

TEST(TargetedDropout, RampsAsTheReferenceSchedule) {
  nn::TargetedDropoutOptions o;
  o.type = "weight", o.gamma = 0.6, o.alpha = 0.4, o.ramp_updates = 100;
  auto [g0, a0] = nn::targeted_rates_at(o, 0);
  EXPECT_EQ(g0, 0.0);
  EXPECT_EQ(a0, 0.0);
  auto [g1, a1] = nn::targeted_rates_at(o, 100);
  EXPECT_NEAR(g1, 0.95 * 0.6, 1e-12);
  EXPECT_NEAR(a1, 0.2, 1e-12);
  auto [g2, a2] = nn::targeted_rates_at(o, 200);
  EXPECT_NEAR(g2, 0.6, 1e-12);
  EXPECT_NEAR(a2, 0.4, 1e-12);
  auto [g3, a3] = nn::targeted_rates_at(o, 5000);
  EXPECT_NEAR(g3, 0.6, 1e-12);
  EXPECT_NEAR(a3, 0.4, 1e-12);
}

TEST(TargetedDropout, DropsOnlyTargetedWeightsAndHasTheGradientOfTheMaskedWeight) {
  torch::manual_seed(1);
  TwoLayers model;
  nn::TargetedDropoutOptions o;
  o.type = "weight", o.gamma = 0.5, o.alpha = 0.5;
  nn::TargetedDropout td(o, model);
  auto before = model.fc1->weight.detach().clone();
  auto targeted = nn::targeted_weight_mask(before, 0.5);
  td.begin_update(0);
  auto dropped = model.fc1->weight.detach().eq(0).logical_and(before.ne(0));
  EXPECT_GT(dropped.sum().item<int64_t>(), 0);
  EXPECT_FALSE(dropped.logical_and(targeted.logical_not()).any().item<bool>()) << "a non-targeted weight was dropped";
  EXPECT_LT(dropped.sum().item<int64_t>(), targeted.sum().item<int64_t>());  // alpha 0.5: not all of them
  auto tokens = torch::tensor({{1, 2, 3}}, torch::kLong);
  model.forward(tokens).pow(2).sum().backward();
  td.end_update();
  EXPECT_TRUE(model.fc1->weight.detach().equal(before)) << "values are back";
  auto grad = model.fc1->weight.grad().clone();
  EXPECT_EQ(grad.masked_select(dropped).abs().max().item<double>(), 0.0);

  // The gradient is that of a forward through W * keep (checked on one layer).
  torch::manual_seed(2);
  struct One : torch::nn::Module {
    One() { fc = register_module("fc", nn::make_linear(5, 3)); }
    nn::Linear fc{nullptr};
  } one;
  nn::TargetedDropout td1(o, one);
  auto x = torch::randn({4, 5});
  auto w0 = one.fc->weight.detach().clone();
  td1.begin_update(0);
  auto keep1 = one.fc->weight.detach().ne(0).to(torch::kFloat);
  one.fc->forward(x).tanh().sum().backward();
  td1.end_update();
  auto wref = w0.clone().requires_grad_(true);
  torch::nn::functional::linear(x, wref * keep1, one.fc->bias.detach()).tanh().sum().backward();
  EXPECT_LT(test::max_abs_diff(one.fc->weight.grad(), wref.grad()), 1e-6);
  EXPECT_TRUE(one.fc->weight.detach().equal(w0));
}

TEST(TargetedDropout, EvaluationPrunesExactlyGammaAndRestores) {
  torch::manual_seed(3);
  TwoLayers model;
  nn::TargetedDropoutOptions o;
  o.type = "weight", o.gamma = 0.5, o.alpha = 0.3;
  nn::TargetedDropout td(o, model);
  auto before = model.fc1->weight.detach().clone();
  {
    nn::ScopedEvalPrune pruned(&td);
    for (int64_t u = 0; u < 8; ++u) EXPECT_EQ(model.fc1->weight[u].eq(0).sum().item<int64_t>(), 3);  // floor(0.5 * 6)
    EXPECT_EQ(model.fc2->weight.eq(0).sum().item<int64_t>(), 4 * 4);
    EXPECT_EQ(model.embed_tokens->weight.eq(0).sum().item<int64_t>(), 0) << "embeddings are not pruned";
  }
  EXPECT_TRUE(model.fc1->weight.detach().equal(before));

  o.type = "unit";
  nn::TargetedDropout tu(o, model);
  nn::ScopedEvalPrune pruned(&tu);
  auto zero_rows = model.fc1->weight.detach().abs().sum(1).eq(0).sum().item<int64_t>();
  EXPECT_EQ(zero_rows, 4);
}

TEST(TargetedDropout, UntargetedBaselinesRescaleWhatTheyKeep) {
  torch::manual_seed(4);
  TwoLayers model;
  nn::TargetedDropoutOptions o;
  o.type = "untargeted_weight", o.alpha = 0.5;
  nn::TargetedDropout td(o, model);
  auto before = model.fc1->weight.detach().clone();
  td.begin_update(0);
  auto ratio = model.fc1->weight.detach() / before;
  auto ok = ratio.eq(0).logical_or((ratio - 2.0).abs().lt(1e-6));
  EXPECT_TRUE(ok.all().item<bool>());
  td.end_update();
  EXPECT_TRUE(model.fc1->weight.detach().equal(before));
}

TEST(Pruning, GivesTheAskedSparsity) {
  torch::manual_seed(5);
  TwoLayers model;
  EXPECT_NEAR(nn::prune_in_place(model, "weight", 0.5), 0.5, 1e-12);  // 6 and 8 weights per unit
  TwoLayers other;
  EXPECT_NEAR(nn::prune_in_place(other, "unit", 0.5), 0.5, 1e-12);    // 8 and 4 units
  EXPECT_EQ(nn::prunable_parameters(model).size(), 2u);
  EXPECT_THROW(nn::prune_in_place(model, "random", 0.5), ConfigError);
}

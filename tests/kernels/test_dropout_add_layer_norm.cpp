#include <gtest/gtest.h>

#include <cmath>

#include "leanseq/core/threads.h"
#include "leanseq/kernels/dropout.h"
#include "leanseq/kernels/dropout_add_layer_norm.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
struct Result {
  torch::Tensor out, d_residual, d_y, d_weight, d_bias;
};

// The operator (fused or composite) on copies of the inputs that require gradients, its output
// and the gradients of sum(out * g), with the generator seeded first.
template <class Op>
Result run(Op op, const torch::Tensor& residual, const torch::Tensor& y, const torch::Tensor& weight,
           const torch::Tensor& bias, const torch::Tensor& g) {
  auto r = residual.clone().requires_grad_(), x = y.clone().requires_grad_();
  auto w = weight.clone().requires_grad_(), b = bias.clone().requires_grad_();
  torch::manual_seed(11);
  auto out = op(r, x, w, b);
  (out * g).sum().backward();
  return {out.detach(), r.grad(), x.grad(), w.grad(), b.grad()};
}

// The fused operator and the composite it replaces, each through run().
Result fused_op(const torch::Tensor& residual, const torch::Tensor& y, double p, bool training,
                const torch::Tensor& weight, const torch::Tensor& bias, const torch::Tensor& g, const std::string& what) {
  Result out;
  EXPECT_EQ(test::calls_of("leanseq::dropout_add_layer_norm",
                           [&] {
                             out = run(
                                 [&](auto& r, auto& x, auto& w, auto& b) {
                                   return kernels::dropout_add_layer_norm(r, x, p, training, w, b, 1e-5);
                                 },
                                 residual, y, weight, bias, g);
                           }),
            1)
      << what;
  return out;
}

Result composite_op(const torch::Tensor& residual, const torch::Tensor& y, double p, bool training,
                    const torch::Tensor& weight, const torch::Tensor& bias, const torch::Tensor& g) {
  return run(
      [&](auto& r, auto& x, auto& w, auto& b) {
        return torch::layer_norm(r + kernels::dropout(x, p, training), {y.size(-1)}, w, b, 1e-5);
      },
      residual, y, weight, bias, g);
}

void expect_close(const Result& a, const Result& b, double tol, const std::string& what) {
  EXPECT_LT(test::max_abs_diff(a.out, b.out), tol) << what << ": output";
  EXPECT_LT(test::max_abs_diff(a.d_residual, b.d_residual), tol) << what << ": residual's gradient";
  EXPECT_LT(test::max_abs_diff(a.d_y, b.d_y), tol) << what << ": y's gradient";
  EXPECT_LT(test::max_abs_diff(a.d_weight, b.d_weight), 10 * tol) << what << ": weight's gradient";
  EXPECT_LT(test::max_abs_diff(a.d_bias, b.d_bias), 10 * tol) << what << ": bias's gradient";
}
}  // namespace

// The fused operator draws the mask kernels::dropout draws from the same generator state, so its
// output and all four gradients equal the composite's (add + layer_norm of a dropout) to float32
// rounding.
TEST(DropoutAddLayerNorm, EqualsTheCompositeWithTheSameMask) {
  for (int64_t C : {37, 256}) {
    torch::manual_seed(3);
    auto residual = torch::randn({4, 6, C}) * 2 + 1, y = torch::randn({4, 6, C}) * 3;
    auto weight = torch::randn({C}), bias = torch::randn({C}), g = torch::randn({4, 6, C});
    for (double p : {0.0, 0.1, 0.5}) {
      for (bool training : {true, false}) {
        const std::string what = "C=" + std::to_string(C) + " p=" + std::to_string(p) + " training=" +
                                 std::to_string(training);
        const auto fused = fused_op(residual, y, p, training, weight, bias, g, what);
        const auto composite = composite_op(residual, y, p, training, weight, bias, g);
        expect_close(fused, composite, 1e-5, what);
        if (training && p >= 0.5) {  // the mask is there: some of y's gradient is exactly 0
          EXPECT_GT(fused.d_y.eq(0).sum().item<int64_t>(), C) << what;
        }
      }
    }
  }
}

TEST(DropoutAddLayerNorm, DoesNotDependOnTheThreadCountAndNeedsNoRecording) {
  torch::manual_seed(4);
  auto residual = torch::randn({64, 33, 96}), y = torch::randn({64, 33, 96});
  auto weight = torch::randn({96}), bias = torch::randn({96}), g = torch::randn({64, 33, 96});
  auto op = [](auto& r, auto& x, auto& w, auto& b) { return kernels::dropout_add_layer_norm(r, x, 0.3, true, w, b, 1e-5); };
  const int before = compute_threads();
  set_compute_threads(1);
  auto one = run(op, residual, y, weight, bias, g);
  set_compute_threads(2);
  auto two = run(op, residual, y, weight, bias, g);
  set_compute_threads(before);
  EXPECT_TRUE(torch::equal(one.out, two.out));
  EXPECT_TRUE(torch::equal(one.d_y, two.d_y));
  // The weight's and the bias's gradients sum 2112 rows in blocks that do not depend on the
  // threads: the same bits with one thread and with two.
  EXPECT_TRUE(torch::equal(one.d_weight, two.d_weight)) << test::max_abs_diff(one.d_weight, two.d_weight);
  EXPECT_TRUE(torch::equal(one.d_bias, two.d_bias)) << test::max_abs_diff(one.d_bias, two.d_bias);
  // Without a recorded gradient (inference): the composite, which drops nothing outside training.
  torch::NoGradGuard no_grad;
  torch::Tensor out;
  EXPECT_EQ(test::calls_of("leanseq::dropout_add_layer_norm",
                           [&] { out = kernels::dropout_add_layer_norm(residual, y, 0.3, false, weight, bias, 1e-5); }),
            0);
  EXPECT_LT(test::max_abs_diff(out, torch::layer_norm(residual + y, {96}, weight, bias, 1e-5)), 1e-5);
}

// Under `train --bf16` y is a linear layer's bfloat16 result: the fused operator reads it widened
// (exactly) and returns float32, so everything but y's gradient equals the float32 composite on
// the widened y; y's gradient is that composite's, rounded once to bfloat16.
TEST(DropoutAddLayerNorm, TakesABfloat16YAndRoundsOnlyItsGradient) {
  const int64_t C = 96;
  torch::manual_seed(5);
  auto residual = torch::randn({3, 7, C}), y = (torch::randn({3, 7, C}) * 2).to(torch::kBFloat16);
  auto weight = torch::randn({C}), bias = torch::randn({C}), g = torch::randn({3, 7, C});
  for (double p : {0.0, 0.2}) {
    const std::string what = "p=" + std::to_string(p);
    const auto fused = fused_op(residual, y, p, true, weight, bias, g, what);
    const auto wide = composite_op(residual, y.to(torch::kFloat), p, true, weight, bias, g);
    EXPECT_EQ(fused.out.scalar_type(), torch::kFloat) << what;
    ASSERT_EQ(fused.d_y.scalar_type(), torch::kBFloat16) << what;
    EXPECT_LT(test::max_abs_diff(fused.out, wide.out), 1e-5) << what;
    EXPECT_LT(test::max_abs_diff(fused.d_residual, wide.d_residual), 1e-5) << what;
    EXPECT_LT(test::max_abs_diff(fused.d_weight, wide.d_weight), 1e-4) << what;
    EXPECT_LT(test::max_abs_diff(fused.d_bias, wide.d_bias), 1e-4) << what;
    // One rounding to bfloat16 (8 significant bits) of a float32 value itself within 1e-5 of the
    // composite's: at most half a unit in the last place, plus that 1e-5.
    const auto err = (fused.d_y.to(torch::kFloat) - wide.d_y).abs();
    const auto bound = wide.d_y.abs() * std::ldexp(1.0, -8) + 1e-5;
    EXPECT_TRUE(err.le(bound).all().item<bool>()) << what << ": " << (err - bound).max().item<float>();
    EXPECT_GT(fused.d_y.to(torch::kFloat).ne(wide.d_y).sum().item<int64_t>(), 0) << what << ": not rounded";
  }
}

#include <gtest/gtest.h>

#include <cmath>

#include "leanseq/kernels/batched_matmul.h"
#include "leanseq/kernels/bf16_products.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
// The product in float64, the reference of the float32 results.
torch::Tensor exact(const torch::Tensor& a, const torch::Tensor& b) {
  return torch::matmul(a.to(torch::kDouble), b.to(torch::kDouble)).to(torch::kFloat);
}

// Operand pairs in the layouts attention passes: heads split by a view and a transposition, keys
// transposed, a probability tensor, an expanded (zero-stride) operand, a plain 3-D batch.
std::vector<std::pair<torch::Tensor, torch::Tensor>> operands() {
  torch::manual_seed(11);
  auto heads = [](int64_t T) { return torch::randn({6, T, 3, 16}).transpose(1, 2); };  // [6, 3, T, 16]
  auto q = heads(7), k = heads(9), v = heads(9);
  auto p = torch::softmax(torch::randn({6, 3, 7, 9}), -1);
  return {{q, k.transpose(-1, -2)},
          {p, v},
          {torch::randn({5, 4, 33}), torch::randn({5, 33, 2})},
          {torch::randn({1, 4, 8}).expand({5, 4, 8}), torch::randn({5, 8, 3})}};
}
}  // namespace

TEST(BatchedMatmul, EqualsTheProductInEveryLayoutAttentionPasses) {
  // In training. (Without oneDNN, as a models-only build may be, this checks the fallback instead.)
  for (const auto& [a, b] : operands()) {
    auto c = kernels::batched_matmul(a.detach().requires_grad_(), b);
    ASSERT_EQ(c.sizes(), exact(a, b).sizes());
    EXPECT_LT(test::max_abs_diff(c, exact(a, b)), 1e-5) << a.sizes() << " x " << b.sizes();
  }
}

TEST(BatchedMatmul, InferenceIsATensProductBitForBit) {
  for (const auto& [a, b] : operands()) {
    EXPECT_TRUE(torch::equal(kernels::batched_matmul(a, b), torch::matmul(a, b)));
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(kernels::batched_matmul(a.detach().requires_grad_(), b), torch::matmul(a, b)));
  }
}

TEST(BatchedMatmul, GradientsEqualThoseOfTheProduct) {
  for (const auto& [a0, b0] : operands()) {
    for (int needs = 1; needs <= 3; ++needs) {  // a only, b only, both
      auto a = a0.detach().clone().requires_grad_(needs & 1);
      auto b = b0.detach().clone().requires_grad_((needs & 2) != 0);
      auto a_ref = a.detach().to(torch::kDouble).requires_grad_(a.requires_grad());
      auto b_ref = b.detach().to(torch::kDouble).requires_grad_(b.requires_grad());
      auto g = torch::randn(exact(a0, b0).sizes());
      (kernels::batched_matmul(a, b) * g).sum().backward();
      (torch::matmul(a_ref, b_ref) * g.to(torch::kDouble)).sum().backward();
      if (a.requires_grad()) {
        EXPECT_LT(test::max_abs_diff(a.grad(), a_ref.grad().to(torch::kFloat)), 1e-5);
      }
      if (b.requires_grad()) {
        EXPECT_LT(test::max_abs_diff(b.grad(), b_ref.grad().to(torch::kFloat)), 1e-5);
      }
      EXPECT_EQ(a.grad().defined(), a.requires_grad());
      EXPECT_EQ(b.grad().defined(), b.requires_grad());
    }
  }
}

TEST(BatchedMatmul, OtherOperandsTakeATensMatmul) {
  // In training too: float64, two dimensions, a broadcast batch, an empty batch give exactly
  // torch::matmul's result.
  auto grad = [](torch::Tensor t) { return t.requires_grad_(); };
  auto a = torch::randn({3, 4, 5}, torch::kDouble), b = torch::randn({3, 5, 2}, torch::kDouble);
  EXPECT_TRUE(torch::equal(kernels::batched_matmul(grad(a), b), torch::matmul(a, b)));
  auto m = torch::randn({4, 5}), n = torch::randn({5, 2});
  EXPECT_TRUE(torch::equal(kernels::batched_matmul(grad(m), n), torch::matmul(m, n)));
  auto x = torch::randn({3, 4, 5}), y = torch::randn({1, 5, 2});
  EXPECT_TRUE(torch::equal(kernels::batched_matmul(grad(x), y), torch::matmul(x, y)));
  EXPECT_EQ(kernels::batched_matmul(grad(torch::randn({0, 4, 5})), torch::randn({0, 5, 2})).sizes(),
            (std::vector<int64_t>{0, 4, 2}));
}

// Under `train --bf16` attention's operands are bfloat16: the product and both gradients are
// bfloat16, each the float32 sum of the bfloat16 operands' products rounded once to bfloat16, and
// where the CPU multiplies bfloat16 natively they go to oneDNN in one call (no ATen bmm, which
// makes one call per matrix). The bound: half a unit in the last of bfloat16's 8 significant bits
// of the exact product, plus what a float32 sum of K terms in any order may lose, K * 2^-24 of the
// sum of the terms' magnitudes (each term, a product of two bfloat16 values, is exact in float32),
// doubled for the rounding of that error itself and for slack.
TEST(BatchedMatmul, Bfloat16OperandsGiveTheirProductRoundedOnce) {
  if (!kernels::bf16_products_native()) {
    // Training stays in float32 there; and under an ONEDNN_MAX_CPU_ISA cap below the CPU's own
    // bfloat16 instructions ATen's bfloat16 bmm itself fails to find a oneDNN kernel.
    GTEST_SKIP() << "this CPU (or its oneDNN cap) has no native bfloat16 products";
  }
  auto as_double = [](const torch::Tensor& t) { return t.detach().to(torch::kDouble); };
  // `got` against the product of x and y (bfloat16 values, here in float64).
  auto within_one_rounding = [](const torch::Tensor& got, const torch::Tensor& x, const torch::Tensor& y) {
    EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
    const auto exact_product = torch::matmul(x, y);
    const auto magnitudes = torch::matmul(x.abs(), y.abs());
    const double terms = static_cast<double>(x.size(-1));
    const auto err = (got.to(torch::kDouble) - exact_product).abs();
    const auto bound = exact_product.abs() * std::ldexp(1.0, -8) + magnitudes * (2 * terms * std::ldexp(1.0, -24));
    EXPECT_TRUE(err.le(bound).all().item<bool>()) << (err - bound).max().item<double>();
  };
  for (const auto& [a0, b0] : operands()) {
    auto a = a0.to(torch::kBFloat16).requires_grad_(), b = b0.to(torch::kBFloat16).requires_grad_();
    auto g = torch::randn(exact(a0, b0).sizes()).to(torch::kBFloat16);
    torch::Tensor c;
    const int64_t bmm_calls = test::calls_of("aten::bmm", [&] {
      c = kernels::batched_matmul(a, b);
      c.backward(g);
    });
    EXPECT_EQ(bmm_calls, 0) << a0.sizes() << " x " << b0.sizes();
    within_one_rounding(c, as_double(a), as_double(b));
    within_one_rounding(a.grad(), as_double(g), as_double(b).transpose(-1, -2));
    within_one_rounding(b.grad(), as_double(a).transpose(-1, -2), as_double(g));
  }
}

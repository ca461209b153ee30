#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include <limits>

#include "leanseq/core/error.h"
#include "leanseq/kernels/batched_matmul.h"
#include "leanseq/kernels/bf16_products.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/int8_gemm.h"
#include "leanseq/kernels/product_flops.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
// x W^T + b in float64, the reference of the float32 results.
torch::Tensor exact(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  auto y = torch::matmul(x.to(torch::kDouble), w.to(torch::kDouble).t());
  if (b.defined()) y = y + b.to(torch::kDouble);
  return y.to(torch::kFloat);
}

// Restores the process's oneDNN rows and training products after a test that changes them.
struct RowsGuard {
  int64_t before = kernels::onednn_rows();
  kernels::TrainingProducts training = kernels::training_products();
  ~RowsGuard() {
    kernels::set_onednn_rows(before);
    kernels::set_training_products(training);
  }
};

bool built_with_onednn() {
  torch::NoGradGuard no_grad;
  return kernels::onednn_linear(torch::ones({1, 2}), torch::ones({3, 2}), {}).defined();
}
}  // namespace

TEST(DenseProducts, OnednnEqualsTheProductAtDecodingShapes) {
  if (!built_with_onednn()) GTEST_SKIP() << "a build without oneDNN";
  torch::manual_seed(3);
  torch::NoGradGuard no_grad;
  auto w = torch::randn({37, 24}), b = torch::randn({37});
  // A step of 5 hypotheses, a [B, T, C] batch, one row, and a transposed (non-contiguous) input.
  for (const auto& x : {torch::randn({5, 1, 24}), torch::randn({3, 4, 24}), torch::randn({24}),
                        torch::randn({24, 6}).t()}) {
    for (const auto& bias : {b, torch::Tensor()}) {
      const auto bias_before = b.clone();
      auto y = kernels::onednn_linear(x, w, bias);
      ASSERT_TRUE(y.defined()) << x.sizes();
      EXPECT_TRUE(torch::equal(b, bias_before)) << "the product wrote into its bias";
      ASSERT_EQ(y.sizes(), torch::linear(x, w, bias).sizes());
      EXPECT_LT(test::max_abs_diff(y, exact(x, w, bias)), 1e-4) << x.sizes() << " bias " << bias.defined();
    }
  }
}

TEST(DenseProducts, FewRowsGoToOnednnAndTheRestToAten) {
  if (!built_with_onednn()) GTEST_SKIP() << "a build without oneDNN";
  RowsGuard guard;
  torch::manual_seed(4);
  auto w = torch::randn({300, 200}), b = torch::randn({300});
  auto few = torch::randn({2, 3, 200}), many = torch::randn({70, 200});
  const std::string onednn = "leanseq::onednn_linear";
  kernels::set_onednn_rows(64);
  {
    torch::NoGradGuard no_grad;
    torch::Tensor y;
    EXPECT_EQ(test::calls_of(onednn, [&] { y = kernels::linear(few, w, b); }), 1);
    EXPECT_TRUE(torch::equal(y, kernels::onednn_linear(few, w, b)));
    EXPECT_EQ(test::calls_of(onednn, [&] { y = kernels::linear(many, w, b); }), 0);
    EXPECT_TRUE(torch::equal(y, torch::linear(many, w, b)));
    // The default, no limit: the larger product goes to oneDNN too.
    kernels::set_onednn_rows(kernels::parse_onednn_rows(nullptr));
    EXPECT_EQ(test::calls_of(onednn, [&] { y = kernels::linear(many, w, b); }), 1);
    EXPECT_TRUE(torch::equal(y, kernels::onednn_linear(many, w, b)));
  }
  // With training products on ATen, whatever autograd records stays with ATen, whatever its size.
  kernels::set_training_products(kernels::TrainingProducts::aten);
  auto wg = w.clone().requires_grad_();
  torch::Tensor y;
  EXPECT_EQ(test::calls_of(onednn, [&] { y = kernels::linear(few, wg, b); }), 0);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_TRUE(torch::equal(y.detach(), torch::linear(few, w, b)));
  // Rows 0: ATen for every size.
  kernels::set_onednn_rows(0);
  torch::NoGradGuard no_grad;
  EXPECT_EQ(test::calls_of(onednn, [&] { y = kernels::linear(few, w, b); }), 0);
  EXPECT_TRUE(torch::equal(y, torch::linear(few, w, b)));
}

TEST(DenseProducts, LinearReluTakesTheSameBackendsAndMatchesReluOfTheProduct) {
  RowsGuard guard;
  kernels::set_onednn_rows(64);
  kernels::set_training_products(kernels::TrainingProducts::aten);
  torch::manual_seed(5);
  auto w = torch::randn({30, 20}), b = torch::randn({30});
  auto few = torch::randn({4, 20}), many = torch::randn({3, 40, 20});
  const std::string onednn = "leanseq::onednn_linear";
  {
    torch::NoGradGuard no_grad;
    torch::Tensor y;
    EXPECT_EQ(test::calls_of(onednn, [&] { y = kernels::linear_relu(few, w, b); }), built_with_onednn() ? 1 : 0);
    EXPECT_TRUE(torch::equal(y, torch::relu(kernels::linear(few, w, b))));
    EXPECT_EQ(test::calls_of(onednn, [&] { y = kernels::linear_relu(many, w, b); }), 0);
    ASSERT_EQ(y.sizes(), (std::vector<int64_t>{3, 40, 30}));
    EXPECT_LT(test::max_abs_diff(y, torch::relu(exact(many, w, b))), 1e-4);
    EXPECT_TRUE(torch::equal(kernels::linear_relu(few, w, {}), torch::relu(kernels::linear(few, w, {}))));
  }
  auto y = kernels::linear_relu(few, w.clone().requires_grad_(), b);  // recorded: relu of ATen's product
  EXPECT_TRUE(y.requires_grad());
  EXPECT_TRUE(torch::equal(y.detach(), torch::relu(torch::linear(few, w, b))));
}

TEST(DenseProducts, OnlyFloat32CpuProductsGoToOnednn) {
  torch::NoGradGuard no_grad;
  auto w = torch::randn({4, 3}, torch::kDouble);
  EXPECT_FALSE(kernels::onednn_linear(torch::randn({2, 3}, torch::kDouble), w, {}).defined());
  EXPECT_FALSE(kernels::onednn_linear(torch::randn({2, 5}), torch::randn({4, 3}), {}).defined());  // K differs
  EXPECT_FALSE(kernels::onednn_linear(torch::randn({0, 3}), torch::randn({4, 3}), {}).defined());
  // kernels::linear still answers them, through ATen.
  EXPECT_TRUE(torch::equal(kernels::linear(torch::ones({2, 3}, torch::kDouble), w, {}),
                           torch::linear(torch::ones({2, 3}, torch::kDouble), w)));
}

TEST(DenseProducts, TheEnvironmentSettingIsARowCount) {
  EXPECT_EQ(kernels::parse_onednn_rows(nullptr), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(kernels::parse_onednn_rows("0"), 0);
  EXPECT_EQ(kernels::parse_onednn_rows("128"), 128);
  for (const char* bad : {"", "-1", "12x", "many", "99999999999999999999999"}) {
    try {
      kernels::parse_onednn_rows(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("LEANSEQ_ONEDNN_ROWS"), std::string::npos) << e.what();
    }
  }
}

// A recorded product with its three gradients against float64 autograd through ATen's linear.
TEST(DenseProducts, TrainingProductsAndTheirGradientsGoToOnednn) {
  if (!built_with_onednn()) GTEST_SKIP() << "a build without oneDNN";
  RowsGuard guard;
  kernels::set_training_products(kernels::TrainingProducts::onednn);
  torch::manual_seed(6);
  const std::string onednn = "leanseq::onednn_linear";
  const auto w0 = torch::randn({37, 24}), b0 = torch::randn({37});
  // A [B, T, C] batch, rows, and a transposed (non-contiguous) input.
  for (const auto& x0 : {torch::randn({3, 4, 24}), torch::randn({7, 24}), torch::randn({24, 6}).t()}) {
    for (bool with_bias : {true, false}) {
      for (bool input_grad : {true, false}) {
        auto x = x0.clone().requires_grad_(input_grad), w = w0.clone().requires_grad_();
        auto b = with_bias ? b0.clone().requires_grad_() : torch::Tensor();
        torch::Tensor y;
        EXPECT_EQ(test::calls_of(onednn, [&] { y = kernels::linear(x, w, b); }), 1);
        const auto g = torch::randn(y.sizes());
        (y * g).sum().backward();
        auto xd = x0.to(torch::kDouble).requires_grad_(input_grad), wd = w0.to(torch::kDouble).requires_grad_();
        auto bd = with_bias ? b0.to(torch::kDouble).requires_grad_() : torch::Tensor();
        auto yd = torch::linear(xd, wd, bd);
        (yd * g.to(torch::kDouble)).sum().backward();
        const std::string what = "input " + std::to_string(x0.dim()) + "-d, bias " + std::to_string(with_bias);
        ASSERT_EQ(y.sizes(), yd.sizes()) << what;
        EXPECT_LT(test::max_abs_diff(y.detach(), yd.detach().to(torch::kFloat)), 1e-4) << what;
        EXPECT_LT(test::max_abs_diff(w.grad(), wd.grad().to(torch::kFloat)), 1e-4) << what;
        if (with_bias) {
          EXPECT_LT(test::max_abs_diff(b.grad(), bd.grad().to(torch::kFloat)), 1e-4) << what;
        }
        if (input_grad) {
          EXPECT_LT(test::max_abs_diff(x.grad(), xd.grad().to(torch::kFloat)), 1e-4) << what;
        } else {
          EXPECT_FALSE(x.grad().defined()) << what;
        }
      }
    }
  }
  // Under CPU autocast (train --bf16): oneDNN's bfloat16 products where it multiplies bfloat16
  // natively (kernels/bf16_products.h), ATen's linear elsewhere, both in bfloat16
  // (where oneDNN runs bfloat16: ATen hands it there on an AVX-512 CPU even under
  // ONEDNN_MAX_CPU_ISA=AVX2, which leaves oneDNN itself without native bfloat16 products).
  if (kernels::onednn_cpu_support().avx512bw) {
    at::autocast::set_cpu_enabled(true);
    torch::Tensor y;
    const auto calls = test::calls_of(onednn, [&] { y = kernels::linear(torch::randn({5, 24}), w0.clone().requires_grad_(), b0); });
    at::autocast::set_cpu_enabled(false);
    const bool native = kernels::bf16_products_native();
    EXPECT_EQ(calls, native ? 1 : 0);
    EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  }
  // Set to ATen, the same recorded product is ATen's.
  kernels::set_training_products(kernels::TrainingProducts::aten);
  auto x = torch::randn({5, 24}), w = w0.clone().requires_grad_();
  torch::Tensor y;
  EXPECT_EQ(test::calls_of(onednn, [&] { y = kernels::linear(x, w, b0); }), 0);
  EXPECT_TRUE(torch::equal(y.detach(), torch::linear(x, w0, b0)));
}

TEST(DenseProducts, TheTrainingProductsSettingNamesALibrary) {
  EXPECT_EQ(kernels::parse_training_products(nullptr), kernels::TrainingProducts::onednn);
  EXPECT_EQ(kernels::parse_training_products("onednn"), kernels::TrainingProducts::onednn);
  EXPECT_EQ(kernels::parse_training_products("aten"), kernels::TrainingProducts::aten);
  for (const char* bad : {"", "ATen", "openblas", "onednn "}) {
    try {
      kernels::parse_training_products(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("LEANSEQ_TRAINING_PRODUCTS"), std::string::npos) << e.what();
    }
  }
}

TEST(DenseProducts, TheProductWorkIsCountedForwardAndBackward) {
  if (!built_with_onednn()) GTEST_SKIP() << "a build without oneDNN";
  RowsGuard guard;
  kernels::set_training_products(kernels::TrainingProducts::onednn);
  const int64_t m = 12, n = 37, k = 24;
  auto x = torch::randn({3, 4, k}).requires_grad_(), w = torch::randn({n, k}).requires_grad_();
  const auto b = torch::randn({n}).requires_grad_();
  const uint64_t one = 2 * m * n * k;
  uint64_t before = kernels::product_flops();
  auto y = kernels::linear(x, w, b);
  EXPECT_EQ(kernels::product_flops() - before, one);
  before = kernels::product_flops();
  y.sum().backward();  // dx and dw: two products of the same size
  EXPECT_EQ(kernels::product_flops() - before, 2 * one);
  // Forward, and without the input's gradient only dw backward.
  before = kernels::product_flops();
  kernels::linear(x.detach(), w, b).sum().backward();
  EXPECT_EQ(kernels::product_flops() - before, 2 * one);
  // A batched product: 6 matrices of [5, 8] by [8, 3].
  before = kernels::product_flops();
  kernels::batched_matmul(torch::randn({2, 3, 5, 8}).requires_grad_(), torch::randn({2, 3, 8, 3}));
  EXPECT_EQ(kernels::product_flops() - before, 2u * 6 * 5 * 3 * 8);
}

TEST(DenseProducts, ShapesAreTalliedWhileAskedAndTimedAloneThroughTheSameSgemm) {
  if (!built_with_onednn()) GTEST_SKIP() << "a build without oneDNN";
  RowsGuard guard;
  kernels::set_training_products(kernels::TrainingProducts::onednn);
  auto x = torch::randn({6, 8}).requires_grad_(), w = torch::randn({5, 8}).requires_grad_();
  kernels::linear(x, w, {}).sum().backward();  // before any tally: not counted below
  std::map<kernels::ProductShape, int64_t> counts;
  {
    kernels::ProductShapes shapes;
    for (int i = 0; i < 2; ++i) kernels::linear(x, w, {}).sum().backward();
    counts = shapes.counts();
  }
  // y = x w^T, dx = dy w, dw = dy^T x: twice each.
  const std::map<kernels::ProductShape, int64_t> expected{
      {{'N', 'T', 6, 5, 8}, 2}, {{'N', 'N', 6, 8, 5}, 2}, {{'T', 'N', 5, 8, 6}, 2}};
  EXPECT_EQ(counts.size(), expected.size());
  for (const auto& [shape, calls] : expected) {
    EXPECT_EQ(counts[shape], calls) << shape.ta << shape.tb << " " << shape.m << "x" << shape.n << "x" << shape.k;
  }
  // Each shape alone: op(a) op(b) as torch::mm computes it.
  torch::NoGradGuard no_grad;
  for (char ta : {'N', 'T'}) {
    for (char tb : {'N', 'T'}) {
      auto a = ta == 'N' ? torch::randn({7, 9}) : torch::randn({9, 7});
      auto b = tb == 'N' ? torch::randn({9, 4}) : torch::randn({4, 9});
      auto c = torch::empty({7, 4});
      ASSERT_TRUE(kernels::onednn_sgemm(ta, tb, a, b, c)) << ta << tb;
      const auto expect = torch::mm(ta == 'N' ? a : a.t(), tb == 'N' ? b : b.t());
      EXPECT_LT(test::max_abs_diff(c, expect), 1e-4) << ta << tb;
    }
  }
  // Sizes that do not match, a transposed view, another type: refused, nothing written.
  auto c = torch::zeros({7, 4});
  EXPECT_FALSE(kernels::onednn_sgemm('N', 'N', torch::randn({7, 9}), torch::randn({8, 4}), c));
  EXPECT_FALSE(kernels::onednn_sgemm('N', 'N', torch::randn({9, 7}).t(), torch::randn({9, 4}), c));
  EXPECT_FALSE(kernels::onednn_sgemm('N', 'N', torch::randn({7, 9}, torch::kDouble), torch::randn({9, 4}), c));
  EXPECT_FALSE(kernels::onednn_sgemm('X', 'N', torch::randn({7, 9}), torch::randn({9, 4}), c));
  EXPECT_TRUE(torch::equal(c, torch::zeros({7, 4})));
}

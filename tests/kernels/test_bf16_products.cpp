#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "leanseq/core/threads.h"
#include "leanseq/kernels/bf16_products.h"
#include "leanseq/kernels/bf16_rows.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/product_flops.h"

using namespace leanseq;

namespace {

torch::Tensor widened(const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kDouble); }

// |c - ref| within k roundings of float32 of the sum of |terms|: op(a) op(b) summed in float32
// over k products of exact bfloat16 values (each product exact in float32).
// A result in bfloat16 may be a further rounding away (half a unit of its 8 bits).
void expect_close_to_product(const torch::Tensor& c, const torch::Tensor& ref, const torch::Tensor& abs_sum, int64_t k,
                             const std::string& what) {
  const double eps = std::numeric_limits<float>::epsilon();
  const double rounding = c.scalar_type() == torch::kBFloat16 ? 1.0 / 256 : 0.0;
  const auto excess =
      (c.to(torch::kDouble) - ref).abs() - abs_sum * (static_cast<double>(k) * eps) - ref.abs() * rounding - 1e-30;
  EXPECT_LE(excess.max().item<double>(), 0.0) << what;
}

// Restores the process's training products and CPU autocast after a test that changes them.
struct Restore {
  kernels::TrainingProducts products = kernels::training_products();
  bool autocast = at::autocast::is_cpu_enabled();
  at::ScalarType type = at::autocast::get_autocast_cpu_dtype();
  ~Restore() {
    kernels::set_training_products(products);
    at::autocast::set_cpu_enabled(autocast);
    at::autocast::set_autocast_cpu_dtype(type);
    at::autocast::clear_cache();
  }
};

// Restores the compute threads after a test that changes them.
struct RestoreThreads {
  int threads = compute_threads();
  ~RestoreThreads() { set_compute_threads(threads); }
};

}  // namespace

TEST(Bf16Rows, RoundAsAtenCastsAndWidenExactly) {
  // Random values of every magnitude, ties, the largest finite value, infinities, NaN, subnormals.
  auto x = torch::randn({4099}) * torch::exp(torch::randn({4099}) * 20);
  std::vector<float> special{0.f,
                             -0.f,
                             1.f + 1.f / 256,
                             1.f + 3.f / 256,
                             1.f + 1.f / 512,
                             std::numeric_limits<float>::max(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::denorm_min(),
                             1e-40f,
                             -3e-39f};
  x = torch::cat({x, torch::tensor(special)});
  const int64_t n = x.numel();
  auto ours = torch::empty({n}, torch::kBFloat16);
  kernels::round_to_bf16_row(x.data_ptr<float>(), reinterpret_cast<uint16_t*>(ours.data_ptr()), n);
  // The same bits as ATen's cast but for NaN's (a NaN either way: ATen's vector loop writes 0xFFFF).
  const auto aten = x.to(torch::kBFloat16);
  const auto bits = [](const torch::Tensor& t) { return t.view(torch::kShort).to(torch::kInt) & 0xFFFF; };
  const auto number = x.isnan().logical_not();
  EXPECT_TRUE(torch::equal(bits(ours).masked_select(number), bits(aten).masked_select(number)));
  EXPECT_TRUE(torch::equal(ours.isnan(), x.isnan()));
  auto wide = torch::empty({n});
  kernels::widen_bf16_row(reinterpret_cast<const uint16_t*>(aten.data_ptr()), wide.data_ptr<float>(), n);
  EXPECT_TRUE(torch::equal(wide.isnan(), aten.to(torch::kFloat).isnan()));
  EXPECT_TRUE(torch::equal(wide.nan_to_num(0), aten.to(torch::kFloat).nan_to_num(0)));
  auto sums = torch::full({n}, 0.5f);
  kernels::add_bf16_row(reinterpret_cast<const uint16_t*>(aten.data_ptr()), sums.data_ptr<float>(), n);
  EXPECT_TRUE(torch::equal(sums.nan_to_num(0), (aten.to(torch::kFloat) + 0.5f).nan_to_num(0)));
}

TEST(Bf16Products, RefusesWhatItCannotMultiply) {
  auto c = torch::zeros({7, 4});
  const auto a = torch::randn({7, 9}).to(torch::kBFloat16), b = torch::randn({9, 4}).to(torch::kBFloat16);
  EXPECT_FALSE(kernels::onednn_bf16_gemm('N', 'N', a.to(torch::kFloat), b, c));  // float32 operand
  EXPECT_FALSE(kernels::onednn_bf16_gemm('N', 'N', a, b.slice(0, 0, 8), c));     // sizes that do not match
  EXPECT_FALSE(kernels::onednn_bf16_gemm('N', 'N', b.t(), a.t(), c));            // not contiguous
  EXPECT_FALSE(kernels::onednn_bf16_gemm('X', 'N', a, b, c));
  EXPECT_FALSE(kernels::onednn_bf16_gemm('N', 'N', a, b, c, torch::zeros({5})));  // bias of another size
  auto wrong_c = torch::zeros({7, 4}, torch::kDouble);
  EXPECT_FALSE(kernels::onednn_bf16_gemm('N', 'N', a, b, wrong_c));
  if (!kernels::bf16_products_native()) {
    EXPECT_FALSE(kernels::onednn_bf16_gemm('N', 'N', a, b, c));
    EXPECT_FALSE(kernels::bf16_trained_linear(torch::randn({3, 9}), torch::randn({4, 9}), {}).defined());
  }
  EXPECT_TRUE(torch::equal(c, torch::zeros({7, 4})));
  // Types bf16_trained_linear does not take: undefined, for ATen's linear to take the product.
  EXPECT_FALSE(kernels::bf16_trained_linear(torch::randn({3, 9}, torch::kDouble), torch::randn({4, 9}), {}).defined());
  EXPECT_FALSE(kernels::bf16_trained_linear(torch::randn({3, 9}), torch::randn({4, 8}), {}).defined());
  EXPECT_FALSE(kernels::bf16_trained_linear(torch::randn({3, 9}), torch::randn({4, 9}), torch::zeros({3})).defined());
}

TEST(Bf16Products, EachLayoutSumsTheRoundedOperandsInFloat32) {
  if (!kernels::bf16_products_native()) GTEST_SKIP() << "oneDNN has no native bfloat16 products on this CPU";
  // One thread takes the kernels made for each shape, two the matmul made once for every size
  // (two sizes in a row: the second reuses it).
  const RestoreThreads restore;
  const int64_t n = 45, k = 300;
  for (const auto& [t, m] : std::vector<std::pair<int, int64_t>>{{1, 37}, {2, 37}, {2, 70}}) {
    set_compute_threads(t);
    for (char ta : {'N', 'T'}) {
      for (char tb : {'N', 'T'}) {
        const auto a = (ta == 'N' ? torch::randn({m, k}) : torch::randn({k, m})).to(torch::kBFloat16);
        const auto b = (tb == 'N' ? torch::randn({k, n}) : torch::randn({n, k})).to(torch::kBFloat16);
        const auto bias = torch::randn({n});
        const auto da = ta == 'N' ? widened(a) : widened(a).t(), db = tb == 'N' ? widened(b) : widened(b).t();
        const auto ref = torch::mm(da, db) + bias.to(torch::kDouble);
        const auto abs_sum = torch::mm(da.abs(), db.abs()) + bias.to(torch::kDouble).abs();
        auto c = torch::empty({m, n});
        const uint64_t before = kernels::product_flops();
        ASSERT_TRUE(kernels::onednn_bf16_gemm(ta, tb, a, b, c, bias)) << ta << tb << " on " << t << " threads";
        EXPECT_EQ(kernels::product_flops() - before, 2u * m * n * k);
        expect_close_to_product(c, ref, abs_sum, k + 1, std::string{ta, tb});
        // A bfloat16 result: the float32 sum rounded once more.
        auto c16 = torch::empty({m, n}, torch::kBFloat16);
        ASSERT_TRUE(kernels::onednn_bf16_gemm(ta, tb, a, b, c16, bias));
        expect_close_to_product(c16, ref, abs_sum, k + 1, std::string{ta, tb} + " in bfloat16");
      }
    }
  }
}

TEST(Bf16Products, TrainedLinearsGradientsAreThoseOfItsRoundedOperands) {
  if (!kernels::bf16_products_native()) GTEST_SKIP() << "oneDNN has no native bfloat16 products on this CPU";
  const int64_t k = 70, n = 33;
  auto x = torch::randn({3, 41, k}).requires_grad_();
  auto w = torch::randn({n, k}).requires_grad_(), b = torch::randn({n}).requires_grad_();
  const auto y = kernels::bf16_trained_linear(x, w, b);
  ASSERT_TRUE(y.defined());
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 41, n}));
  const auto g = torch::randn({3, 41, n}).to(torch::kBFloat16);
  y.backward(g);
  // The references in float64 from the operands rounded to bfloat16 (the gradient's too).
  const auto xr = widened(x.detach()).view({-1, k}), wr = widened(w.detach()), gr = widened(g).view({-1, n});
  expect_close_to_product(y.detach().view({-1, n}), torch::mm(xr, wr.t()) + b.detach().to(torch::kDouble),
                          torch::mm(xr.abs(), wr.abs().t()) + b.detach().to(torch::kDouble).abs(), k + 1, "y");
  expect_close_to_product(x.grad().view({-1, k}), torch::mm(gr, wr), torch::mm(gr.abs(), wr.abs()), n, "dx");
  expect_close_to_product(w.grad(), torch::mm(gr.t(), xr), torch::mm(gr.abs().t(), xr.abs()), 123, "dw");
  const auto g64 = widened(g).view({-1, n});
  expect_close_to_product(b.grad(), g64.sum(0), g64.abs().sum(0), 123, "db");
  EXPECT_EQ(w.grad().scalar_type(), torch::kFloat);
  EXPECT_EQ(x.grad().scalar_type(), torch::kFloat);
  // The bias's gradient adds the rows in one order whatever the threads.
  const auto db = b.grad().clone();
  const int threads = compute_threads();
  set_compute_threads(1);
  b.mutable_grad().reset();
  kernels::bf16_trained_linear(x, w, b).backward(g);
  set_compute_threads(threads);
  EXPECT_TRUE(torch::equal(b.grad(), db));
  // An input in bfloat16 (another autocast operator's result) gets its gradient in bfloat16.
  auto x16 = torch::randn({5, k}).to(torch::kBFloat16).requires_grad_();
  kernels::bf16_trained_linear(x16, w, {}).sum().backward();
  EXPECT_EQ(x16.grad().scalar_type(), torch::kBFloat16);
}

TEST(Bf16Products, TrainingUnderCpuAutocastTakesThemUnlessAtensProductsAreAskedFor) {
  if (!kernels::bf16_products_native()) GTEST_SKIP() << "oneDNN has no native bfloat16 products on this CPU";
  Restore restore;
  at::autocast::set_cpu_enabled(true);
  at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  auto x = torch::randn({6, 8}).requires_grad_(), w = torch::randn({5, 8}).requires_grad_();
  kernels::set_training_products(kernels::TrainingProducts::onednn);
  std::map<kernels::ProductShape, int64_t> counts;
  {
    kernels::ProductShapes shapes;
    auto y = kernels::linear(x, w, {});
    EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
    const auto node = y.grad_fn()->next_edges().at(0).function;  // past the view to [..., N]
    EXPECT_NE(node->name().find("TrainedLinearBf16"), std::string::npos) << node->name();
    y.sum().backward();
    counts = shapes.counts();
  }
  for (const auto& [ta, tb, m, nn, kk] : {std::tuple{'N', 'T', 6, 5, 8}, {'N', 'N', 6, 8, 5}, {'T', 'N', 5, 8, 6}}) {
    kernels::ProductShape shape{ta, tb, m, nn, kk};
    shape.bf16 = true;
    EXPECT_EQ(counts[shape], 1) << ta << tb;
  }
  kernels::set_training_products(kernels::TrainingProducts::aten);
  const auto y = kernels::linear(x, w, {});  // autocast's linear
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(y.grad_fn()->name().find("TrainedLinear"), std::string::npos) << y.grad_fn()->name();
}

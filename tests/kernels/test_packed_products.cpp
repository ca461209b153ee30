#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "leanseq/core/error.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/packed_products.h"
#include "leanseq/kernels/product_flops.h"

using namespace leanseq;

namespace {

// Each test with packed weights on, an empty store and no gradient recorded; skipped in a build
// without oneDNN. The setting and the store's limit are restored, and the store emptied, after it.
class PackedProducts : public ::testing::Test {
 protected:
  void SetUp() override {
    kernels::clear_packed_store();
    kernels::set_packed_weights(true);
    if (!kernels::packed_product(torch::ones({1, 2}), torch::ones({3, 2}), {}).defined()) {
      GTEST_SKIP() << "a build without oneDNN";
    }
    kernels::clear_packed_store();
  }
  void TearDown() override {
    kernels::set_packed_weights(before_);
    kernels::set_packed_store_limit(kernels::parse_packed_weights_limit(std::getenv("LEANSEQ_PACKED_WEIGHTS_MB")) << 20);
    kernels::clear_packed_store();
  }

 private:
  const bool before_ = kernels::packed_weights();
  torch::NoGradGuard no_grad_;
};

// Whether y, a float32 x w^T + b, is within the rounding its sums allow: per element, K terms
// rounded, so a bound of 4 K eps times the sum of the terms' magnitudes (plus the bias's).
void expect_product(const torch::Tensor& y, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  const auto xd = x.to(torch::kDouble), wd = w.to(torch::kDouble);
  auto exact = torch::mm(xd, wd.t()), magnitude = torch::mm(xd.abs(), wd.abs().t());
  if (b.defined()) {
    exact = exact + b.to(torch::kDouble);
    magnitude = magnitude + b.to(torch::kDouble).abs();
  }
  const double eps = std::numeric_limits<float>::epsilon();
  const auto excess = (y.to(torch::kDouble) - exact).abs() - magnitude * (4.0 * static_cast<double>(x.size(1)) * eps);
  EXPECT_LE(excess.max().item<double>(), 0.0) << "K " << x.size(1) << " N " << w.size(0) << " M " << x.size(0);
}

}  // namespace

TEST_F(PackedProducts, EqualTheProductAndARowsResultDoesNotDependOnTheOtherRows) {
  torch::manual_seed(5);
  // A decoding step's shapes, an FFN's long sums (K 4096), and an odd size; 1100 rows cross the
  // pieces of 512, of a multiple of 64 and of the rest.
  for (const auto& [K, N] : std::vector<std::pair<int64_t, int64_t>>{{256, 768}, {4096, 64}, {37, 501}}) {
    const auto x = torch::randn({1100, K}), w = torch::randn({N, K}), b = torch::randn({N});
    for (const auto& bias : {b, torch::Tensor()}) {
      const auto all = kernels::packed_product(x, w, bias);
      ASSERT_TRUE(all.defined());
      ASSERT_EQ(all.sizes(), (std::vector<int64_t>{1100, N}));
      expect_product(all, x, w, bias);
      for (int64_t m : {1, 5, 63, 64, 65, 130, 600}) {
        const auto some = kernels::packed_product(x.narrow(0, 0, m).contiguous(), w, bias);
        EXPECT_TRUE(torch::equal(some, all.narrow(0, 0, m)))
            << "K " << K << " N " << N << " rows " << m << ", oneDNN's " << kernels::packed_primitive();
      }
      // Rows past the first ones: the same bits as in the whole product.
      const auto tail = kernels::packed_product(x.narrow(0, 700, 77).contiguous(), w, bias);
      EXPECT_TRUE(torch::equal(tail, all.narrow(0, 700, 77))) << "K " << K << " N " << N;
    }
  }
  EXPECT_EQ(kernels::packed_store().weights, 1);  // the two weights freed were swept by the last packing
}

TEST_F(PackedProducts, InferencesLinearLayersTakeThemAndCountTheirWork) {
  torch::manual_seed(6);
  const auto x = torch::randn({2, 5, 48}), w = torch::randn({40, 48}), b = torch::randn({40});
  kernels::set_packed_weights(false);
  const auto sgemm = kernels::linear(x, w, b);
  EXPECT_EQ(kernels::packed_store().weights, 0);
  kernels::set_packed_weights(true);
  const double before = kernels::product_flops();
  const auto packed = kernels::linear(x, w, b);
  EXPECT_EQ(kernels::product_flops() - before, 2.0 * 10 * 40 * 48);
  EXPECT_EQ(kernels::packed_store().weights, 1);
  EXPECT_GE(kernels::packed_store().bytes, 40 * 48 * 4);  // the layout pads N
  ASSERT_EQ(packed.sizes(), sgemm.sizes());
  expect_product(packed.view({10, 40}), x.view({10, 48}), w, b);
  // relu(linear) too, and a second use reads the same copy.
  EXPECT_TRUE(torch::equal(kernels::linear_relu(x, w, b), packed.relu()));
  EXPECT_EQ(kernels::packed_store().weights, 1);
  // A recorded product is training's: never packed.
  const auto wg = w.clone().requires_grad_();
  {
    torch::AutoGradMode grad(true);
    kernels::linear(x, wg, b).sum().backward();
  }
  EXPECT_EQ(kernels::packed_store().weights, 1);
}

TEST_F(PackedProducts, AWeightChangedInPlaceIsPackedAgainAndAFreedOneReleased) {
  torch::manual_seed(7);
  const auto x = torch::randn({5, 32});
  auto w = torch::randn({16, 32});
  const auto first = kernels::packed_product(x, w, {});
  w.mul_(-2);  // bumps the version
  const auto second = kernels::packed_product(x, w, {});
  expect_product(second, x, w, {});
  EXPECT_LT((second + 2 * first).abs().max().item<double>(), 1e-3);
  EXPECT_EQ(kernels::packed_store().weights, 1);
  // Freed: its copy goes at the next packing, and no new weight at the same address reads it.
  for (int i = 0; i < 3; ++i) {
    auto fresh = torch::randn({16, 32});
    expect_product(kernels::packed_product(x, fresh, {}), x, fresh, {});
  }
  EXPECT_EQ(kernels::packed_store().weights, 2);  // w and the last fresh one
  // Made in inference mode (no version kept): packed, and read again.
  c10::InferenceMode inference;
  const auto made = torch::randn({8, 32});
  expect_product(kernels::packed_product(x, made, {}), x, made, {});
  EXPECT_TRUE(torch::equal(kernels::packed_product(x, made, {}), kernels::packed_product(x, made, {})));
}

TEST_F(PackedProducts, TheStoreKeepsToItsLimitAndTheSgemmTakesTheRest) {
  const auto x = torch::randn({3, 64}), a = torch::randn({64, 64}), b = torch::randn({64, 64});
  kernels::set_packed_store_limit(64 * 64 * 4);  // room for one
  EXPECT_TRUE(kernels::packed_product(x, a, {}).defined());
  EXPECT_FALSE(kernels::packed_product(x, b, {}).defined());
  const auto y = kernels::linear(x, b, {});  // the sgemm's
  expect_product(y, x, b, {});
  EXPECT_EQ(kernels::packed_store().bytes, 64 * 64 * 4);
  kernels::set_packed_weights(false);
  EXPECT_FALSE(kernels::packed_product(x, a, {}).defined());
}

TEST_F(PackedProducts, ThreadsShareAPackedWeight) {
  torch::manual_seed(8);
  const auto x = torch::randn({70, 128}), w = torch::randn({300, 128}), b = torch::randn({300});
  const auto expected = kernels::packed_product(x, w, b);
  std::vector<torch::Tensor> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      torch::NoGradGuard inner;
      for (int i = 0; i < 20; ++i) got[t] = kernels::packed_product(x, w, b);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& y : got) EXPECT_TRUE(torch::equal(y, expected));
}

TEST(PackedProductSettings, AreReadOrRefusedByName) {
  EXPECT_TRUE(kernels::parse_packed_weights(nullptr));
  EXPECT_TRUE(kernels::parse_packed_weights("1"));
  EXPECT_FALSE(kernels::parse_packed_weights("0"));
  EXPECT_EQ(kernels::parse_packed_weights_limit(nullptr), 4096);
  EXPECT_EQ(kernels::parse_packed_weights_limit("512"), 512);
  for (const char* bad : {"yes", "", "2"}) {
    try {
      kernels::parse_packed_weights(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("LEANSEQ_PACKED_WEIGHTS="), std::string::npos) << e.what();
    }
  }
  for (const char* bad : {"0", "-3", "1.5", "lots", "99999999999999999999"}) {
    try {
      kernels::parse_packed_weights_limit(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("LEANSEQ_PACKED_WEIGHTS_MB"), std::string::npos) << e.what();
    }
  }
}

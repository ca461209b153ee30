#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "leanseq/core/threads.h"
#include "leanseq/kernels/exp_avx512.h"
#include "leanseq/kernels/softmax.h"

using namespace leanseq;

// Against ATen's softmax: widths below, at and past a block of 8, a row with one dominant entry, a
// constant row, masked entries (-inf) anywhere in a row, four dimensions and a non-contiguous input.
// A probability is an exponential over a sum of n of them, each library adding in its own order:
// the tolerance grows with n (a unit of float32 rounding per term, and two for the exponential
// and the division).
TEST(FixedOrderSoftmax, EqualsAtensWithinRounding) {
  torch::manual_seed(51);
  const double eps = std::numeric_limits<float>::epsilon();
  for (int64_t n : {1, 3, 8, 9, 16, 37, 200}) {
    auto x = torch::randn({29, n}) * 6 - 2;
    x[3].fill_(1.5);
    x[4][0] = 80.f;
    if (n > 2) x.narrow(0, 5, 4).narrow(1, 1, n / 2).fill_(-std::numeric_limits<float>::infinity());
    auto got = kernels::fixed_order_softmax(x);
    ASSERT_TRUE(got.defined());
    auto want = torch::softmax(x, -1);
    const double tol = (n + 2) * eps;
    EXPECT_TRUE(torch::allclose(got, want, tol, 1e-7)) << n << " " << (got - want).abs().max().item<double>();
    EXPECT_TRUE(torch::allclose(got.sum(-1), torch::ones({29}), 0, tol)) << n;
  }
  auto x4 = torch::randn({3, 4, 5, 11}).transpose(1, 2);
  EXPECT_TRUE(torch::allclose(kernels::fixed_order_softmax(x4), torch::softmax(x4, -1), 13 * eps, 1e-7));
}

// A row followed by masked entries (a sentence's keys, then its batch's padding) gives its own
// entries the same bits as the row alone and exact zeros to the rest, on one thread or two.
TEST(FixedOrderSoftmax, MaskedEntriesAfterARowLeaveItsBitsAlone) {
  torch::manual_seed(52);
  const float inf = std::numeric_limits<float>::infinity();
  const int before = torch::get_num_threads();
  for (int threads : {1, 2}) {
    set_compute_threads(threads);
    for (int64_t n = 1; n <= 40; ++n) {
      auto row = torch::randn({64, n}) * 4;
      auto alone = kernels::fixed_order_softmax(row);
      for (int64_t pads : {1, 5, 8, 13}) {
        auto padded = torch::cat({row, torch::full({64, pads}, -inf)}, 1);
        auto got = kernels::fixed_order_softmax(padded);
        EXPECT_TRUE(torch::equal(got.narrow(1, 0, n), alone)) << n << " keys, " << pads << " pads, " << threads;
        EXPECT_TRUE(torch::equal(got.narrow(1, n, pads), torch::zeros({64, pads})));
      }
    }
  }
  set_compute_threads(before);
}

// Rows given together (an attention's heads of one decoding row) get each row's own bits: widths
// up to and past a register of 16, counts around the groups of four the short rows go in, rows
// with masked entries (-inf), one dominant entry, a constant, and all masked.
TEST(FixedOrderSoftmax, RowsTogetherGetEachRowsOwnBits) {
  torch::manual_seed(53);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n = 1; n <= 24; ++n) {
    for (int64_t count = 1; count <= 9; ++count) {
      auto x = torch::randn({count, n}) * 5;
      if (count > 1 && n > 1) x[1].narrow(0, n / 2, n - n / 2).fill_(-inf);
      if (count > 2) x[2][0] = 90.f;
      if (count > 3) x[3].fill_(-2.5f);
      if (count > 5) x[5].fill_(-inf);
      auto each = x.clone();
      for (int64_t r = 0; r < count; ++r) kernels::softmax_row(each.data_ptr<float>() + r * n, n);
      auto together = x.clone();
      kernels::softmax_rows(together.data_ptr<float>(), n, count);
      // NaN where a row is all masked: compared as bits.
      EXPECT_EQ(std::memcmp(each.data_ptr<float>(), together.data_ptr<float>(), count * n * sizeof(float)), 0)
          << n << " entries, " << count << " rows";
    }
  }
}

// What the loop leaves to ATen: other types, a recorded gradient.
TEST(FixedOrderSoftmax, LeavesOtherTensorsToTheCaller) {
  EXPECT_FALSE(kernels::fixed_order_softmax(torch::randn({2, 5}, torch::kDouble)).defined());
  EXPECT_FALSE(kernels::fixed_order_softmax(torch::randn({2, 5}, torch::requires_grad())).defined());
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(kernels::fixed_order_softmax(torch::randn({2, 5}, torch::requires_grad())).defined());
}

#if defined(__x86_64__)
// The inline AVX-512 exponential of the softmax rows: within two units of float32 rounding of
// double-precision exp over the range a shifted row takes (x - max <= 0), 1 at 0, and exactly 0
// at -inf and far below, where masked entries must add nothing.
// GCC 12 takes the intrinsics' _mm512_undefined_ps() for an uninitialised variable.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) static void exp16(const float* x, float* out) {
  _mm512_storeu_ps(out, kernels::exp_avx512(_mm512_loadu_ps(x)));
}
#pragma GCC diagnostic pop

TEST(ExpAvx512, WithinTwoRoundingsOfExp) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 on this CPU";
  const float inf = std::numeric_limits<float>::infinity();
  float x[16], got[16];
  double worst = 0;
  for (int i = 0; i < 200000; i += 16) {
    for (int l = 0; l < 16; ++l) x[l] = -87.f * static_cast<float>(i + l) / 200000.f;
    exp16(x, got);
    for (int l = 0; l < 16; ++l) worst = std::max(worst, std::abs(got[l] / std::exp(static_cast<double>(x[l])) - 1));
  }
  EXPECT_LT(worst, 2 * std::numeric_limits<float>::epsilon());
  const float edges[16] = {0.f, -inf, -110.f, -200.f, -1e30f, 0.5f, -0.5f, 1.f, -1.f, 10.f, -10.f, -50.f, 3.f, -3.f, 0.f, -inf};
  exp16(edges, got);
  EXPECT_EQ(got[0], 1.f);
  for (int l : {1, 2, 3, 4, 15}) EXPECT_EQ(got[l], 0.f) << edges[l];
  for (int l = 5; l < 14; ++l) EXPECT_NEAR(got[l] / std::exp(static_cast<double>(edges[l])), 1, 3e-7) << edges[l];
}
#endif

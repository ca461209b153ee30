#include <gtest/gtest.h>

#include "leanseq/core/threads.h"
#include "leanseq/kernels/log_softmax.h"
#include "support/fixtures.h"

using namespace leanseq;

// Against ATen's log_softmax: a decoding step's [rows, vocabulary] (large logits, a row with one
// dominant entry, a constant row), widths that are no multiple of a vector, three dimensions, a
// non-contiguous input, and what the loop leaves to ATen (double, a gradient).
TEST(LogSoftmax, EqualsAtensWithinRounding) {
  torch::manual_seed(41);
  for (int64_t V : {1, 13, 8000}) {
    auto x = torch::randn({37, V}) * 8 + 3;
    x[4].fill_(2.5);
    x[5][0] = 90.f;
    auto got = kernels::log_softmax(x);
    auto want = torch::log_softmax(x, -1);
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-5)) << V << " " << (got - want).abs().max().item<double>();
  }
  auto x3 = torch::randn({4, 3, 100}).transpose(0, 1);
  EXPECT_TRUE(torch::allclose(kernels::log_softmax(x3), torch::log_softmax(x3, -1), 1e-5, 1e-5));
  auto xd = torch::randn({3, 10}, torch::kDouble);
  auto d = kernels::log_softmax(xd);
  EXPECT_EQ(d.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::allclose(d, torch::log_softmax(xd, -1).to(torch::kFloat), 1e-6, 1e-6));
  auto xg = torch::randn({2, 5}, torch::requires_grad());
  kernels::log_softmax(xg).select(1, 2).sum().backward();
  ASSERT_TRUE(xg.grad().defined()) << "a recorded input takes ATen's differentiable operator";
}

// A row's result depends on that row alone (a sentence decodes the same alone or batched) and not
// on the thread count.
TEST(LogSoftmax, ARowIsTheSameAloneOrBatchedOnAnyThreadCount) {
  torch::manual_seed(42);
  auto x = torch::randn({320, 8000}) * 5;
  const int before = torch::get_num_threads();
  set_compute_threads(1);
  auto one = kernels::log_softmax(x);
  set_compute_threads(2);
  auto two = kernels::log_softmax(x);
  set_compute_threads(before);
  EXPECT_TRUE(torch::equal(one, two));
  EXPECT_TRUE(torch::equal(kernels::log_softmax(x.narrow(0, 200, 1)), two.narrow(0, 200, 1)));
}

// Logits moved in, which nothing else refers to, are overwritten with the same result as a fresh
// one; logits still referred to elsewhere (a named tensor, another view of the storage) are not.
TEST(LogSoftmax, OverwritesOnlyLogitsNothingElseRefersTo) {
  torch::manual_seed(43);
  auto x = torch::randn({20, 1000}) * 4;
  const auto want = kernels::log_softmax(x);
  EXPECT_FALSE(torch::equal(x, want)) << "a named tensor is left as it was";
  auto moved = x.clone();
  const void* storage = moved.data_ptr();
  auto got = kernels::log_softmax(std::move(moved));
  EXPECT_EQ(got.data_ptr(), storage);
  EXPECT_TRUE(torch::equal(got, want));
  auto base = x.clone();
  auto view = base.unsqueeze(0);
  auto from_view = kernels::log_softmax(std::move(view));
  EXPECT_TRUE(torch::equal(base, x)) << "another tensor shares the storage";
  EXPECT_TRUE(torch::equal(from_view.squeeze(0), want));
}

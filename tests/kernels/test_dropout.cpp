#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "leanseq/core/threads.h"
#include "leanseq/kernels/dropout.h"
#include "leanseq/kernels/parallel.h"

using namespace leanseq;

TEST(Dropout, DropsTheExpectedShareScalesTheRestAndFollowsTheSeed) {
  auto x = torch::ones({300, 1001});
  for (double p : {0.1, 0.5}) {
    torch::manual_seed(5);
    auto y = kernels::dropout(x, p, true);
    const double kept = y.ne(0).to(torch::kDouble).mean().item<double>();
    EXPECT_NEAR(kept, 1 - p, 0.005) << p;
    EXPECT_NEAR(y.max().item<float>(), 1.0 / (1 - p), 1e-6);
    EXPECT_NEAR(y.mean().item<double>(), 1.0, 0.01);
    torch::manual_seed(5);
    EXPECT_TRUE(kernels::dropout(x, p, true).equal(y));  // the same seed, the same mask
    EXPECT_FALSE(kernels::dropout(x, p, true).equal(y));  // the generator moved on
  }
  EXPECT_TRUE(kernels::dropout(x, 0.3, false).equal(x));
  EXPECT_TRUE(kernels::dropout(x, 0.0, true).equal(x));
}

TEST(Dropout, GradientIsTheMask) {
  auto x = torch::randn({7, 33}, torch::requires_grad());
  auto y = kernels::dropout(x, 0.4, true);
  y.sum().backward();
  auto mask = (y.detach() / x.detach());
  EXPECT_TRUE(torch::allclose(x.grad(), mask, 1e-5, 1e-6));
  // Neighbouring elements are not correlated: about a quarter of adjacent pairs both dropped.
  auto z = kernels::dropout(torch::ones({1 << 16}), 0.5, true).eq(0);
  const double both = (z.narrow(0, 0, (1 << 16) - 1) & z.narrow(0, 1, (1 << 16) - 1)).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(both, 0.25, 0.01);
}

TEST(KernelThreads, FollowTheComputeThreadCount) {
  const int before = torch::get_num_threads();
  set_compute_threads(1);
  EXPECT_EQ(kernels::workers_for(1 << 30, 1), 1);
  set_compute_threads(2);
  EXPECT_EQ(kernels::workers_for(1 << 30, 1), 2);
  EXPECT_EQ(kernels::workers_for(10, 64), 1);  // too little work for a second thread
  set_compute_threads(before);
}

// Every item in exactly one chunk, chunk w = [w * ceil(n / workers), ...), also when the call is
// made from inside another one's chunk (where the OpenMP team is the calling thread alone).
TEST(KernelThreads, ChunksCoverEveryItemOnceAlsoInsideAnotherCall) {
  auto check = [](int64_t n, int workers) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    std::vector<int> owner(static_cast<size_t>(n), -1);
    kernels::parallel_chunks(n, workers, [&](int w, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        seen[static_cast<size_t>(i)]++;
        owner[static_cast<size_t>(i)] = w;
      }
    });
    const int64_t chunk = (n + workers - 1) / workers;
    for (int64_t i = 0; i < n; ++i) {
      if (seen[static_cast<size_t>(i)] != 1 || owner[static_cast<size_t>(i)] != i / chunk) return false;
    }
    return true;
  };
  EXPECT_TRUE(check(1000, 2));
  EXPECT_TRUE(check(1001, 3));
  EXPECT_TRUE(check(2, 3));
  std::atomic<int> inner_ok{0};
  kernels::parallel_chunks(4, 2, [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) inner_ok += check(257, 2);
  });
  EXPECT_EQ(inner_ok, 4);
}

// Under CPU autocast the activations are bfloat16: their mask keeps and drops the same elements as
// float32's for a seed, each multiplier float32's rounded (and so for half and double).
TEST(Dropout, ReducedPrecisionMasksAreFloatsMaskRounded) {
  auto x = torch::ones({3, 1001});
  torch::manual_seed(9);
  const auto want = kernels::dropout(x, 0.3, true);
  for (auto type : {torch::kBFloat16, torch::kHalf, torch::kDouble}) {
    torch::manual_seed(9);
    const auto got = kernels::dropout(x.to(type), 0.3, true);
    EXPECT_EQ(got.scalar_type(), type);
    EXPECT_TRUE(got.equal(want.to(type))) << type;
  }
}

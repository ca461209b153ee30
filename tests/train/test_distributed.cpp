// The collectives of train/distributed.h between two ranks of one process (one thread each) over
// loopback Gloo: bucketed gradient sums, reductions, broadcasts and the weight-consistency check.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "leanseq/train/distributed.h"
#include "leanseq/train/launcher.h"
#include "support/fixtures.h"

using namespace leanseq;
using namespace leanseq::train;

namespace {

// Runs body(d) on ranks 0 and 1 concurrently; an exception on either rank fails the test.
template <class Body>
void on_two_ranks(Body body) {
  if (!Distributed::supports(torch::kCPU)) GTEST_SKIP() << "this build has no Gloo process group";
  const int port = free_loopback_port();
  std::string errors[2];
  std::thread ranks[2];
  for (int r = 0; r < 2; ++r) {
    ranks[r] = std::thread([&, r] {
      try {
        DistributedEnv env;
        env.rank = r;
        env.world_size = 2;
        env.master_port = port;
        Distributed d(env, std::chrono::seconds(20));
        body(d);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// Parameters of mixed sizes and dtypes whose gradients depend on the rank; the last has no
// gradient on rank 1.
std::vector<torch::Tensor> parameters_with_gradients(int rank) {
  std::vector<torch::Tensor> ps;
  const std::vector<int64_t> sizes{3, 17, 1, 40, 5};
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto dtype = i == 3 ? torch::kDouble : torch::kFloat;
    auto p = torch::zeros({sizes[i]}, dtype).requires_grad_();
    if (!(rank == 1 && i + 1 == sizes.size())) {
      p.mutable_grad() = torch::arange(sizes[i], dtype) * (rank + 1) + static_cast<double>(i);
    }
    ps.push_back(p);
  }
  return ps;
}

}  // namespace

TEST(DistributedCollectives, GradientAllReduceSumsEveryBucketForAnyBucketSize) {
  for (int64_t bucket_bytes : {int64_t{8}, int64_t{100}, int64_t{1} << 20}) {
    on_two_ranks([&](Distributed& d) {
      auto ps = parameters_with_gradients(d.rank());
      d.all_reduce_gradients(ps, bucket_bytes);
      auto mine = parameters_with_gradients(0), other = parameters_with_gradients(1);
      for (size_t i = 0; i < ps.size(); ++i) {
        auto want = mine[i].grad() + (other[i].grad().defined() ? other[i].grad() : torch::zeros_like(mine[i]));
        EXPECT_TRUE(ps[i].grad().equal(want)) << "bucket " << bucket_bytes << " parameter " << i;
      }
    });
  }
}

TEST(DistributedCollectives, ReductionsAndBroadcastsAgreeOnEveryRank) {
  on_two_ranks([](Distributed& d) {
    auto s = torch::tensor({1.0 + d.rank(), -2.0 * d.rank()}, torch::kDouble);
    d.all_reduce_sum(s, "a test sum");
    EXPECT_TRUE(s.equal(torch::tensor({3.0, -2.0}, torch::kDouble)));
    auto m = torch::tensor({static_cast<double>(d.rank()), 5.0 - d.rank()}, torch::kDouble);
    d.all_reduce_max(m, "a test max");
    EXPECT_TRUE(m.equal(torch::tensor({1.0, 5.0}, torch::kDouble)));
    std::vector<torch::Tensor> b{torch::full({4}, 10.0 * d.rank()), torch::full({2, 2}, 1.0 + d.rank())};
    d.broadcast(b, 1, "a test broadcast");
    EXPECT_TRUE(b[0].equal(torch::full({4}, 10.0)));
    EXPECT_TRUE(b[1].equal(torch::full({2, 2}, 2.0)));
  });
}

TEST(DistributedCollectives, TheConsistencyCheckFindsOneDivergedWeight) {
  on_two_ranks([](Distributed& d) {
    std::vector<torch::Tensor> w{torch::linspace(0, 1, 50), torch::ones({3, 3}, torch::kDouble)};
    EXPECT_EQ(d.max_difference_from_rank0(w), 0.0);
    // Rank 1 drifts in one element; both ranks learn by how much.
    if (d.rank() == 1) w[1][2][1] += 0.25;
    EXPECT_DOUBLE_EQ(d.max_difference_from_rank0(w), 0.25);
  });
}

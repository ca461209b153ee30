#include <gtest/gtest.h>

#if __has_include(<oneapi/dnnl/dnnl.hpp>)
#include "leanseq/kernels/onednn_engine.h"

#include <memory>
#include <vector>

using leanseq::kernels::execute_on_this_thread;
using leanseq::kernels::onednn_cpu_engine;
using leanseq::kernels::PrimitiveCache;
using leanseq::kernels::TeamSize;

// oneDNN splits a primitive's work for the threads there are when it is made: a thread whose count
// changed gets a primitive of its own, and the same count finds the one made before.
TEST(PrimitiveCache, MakesOnePrimitivePerShapeAndTeamSize) {
  PrimitiveCache<int, int> cache(8);
  int made = 0;
  auto make = [&] { return ++made; };
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = cache.get(7, make), again = cache.get(7, make), other_shape = cache.get(8, make);
  omp_set_num_threads(2);
  const auto two = cache.get(7, make);
  omp_set_num_threads(1);
  const auto one_later = cache.get(7, make);
  omp_set_num_threads(before);
  EXPECT_EQ(*one, 1);
  EXPECT_EQ(again, one);
  EXPECT_EQ(*other_shape, 2);
  EXPECT_EQ(*two, 3);
  EXPECT_EQ(one_later, one);
  EXPECT_EQ(made, 3);
}

// A scope's team size: primitives made in it are made for that size (the cache's key), and the
// thread's own size comes back at its end; the same size changes nothing.
TEST(TeamSize, SetsTheTeamForItsScopeAndRestoresIt) {
  PrimitiveCache<int, int> cache(8);
  int made = 0;
  auto make = [&] { return ++made; };
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = cache.get(7, make);
  omp_set_num_threads(2);
  {
    const TeamSize team(1);
    EXPECT_EQ(omp_get_max_threads(), 1);
    EXPECT_EQ(cache.get(7, make), one);
  }
  EXPECT_EQ(omp_get_max_threads(), 2);
  {
    const TeamSize team(2);
    EXPECT_EQ(omp_get_max_threads(), 2);
  }
  EXPECT_EQ(omp_get_max_threads(), 2);
  EXPECT_EQ(made, 1);
  omp_set_num_threads(before);
}

// A cached primitive run through the thread's kept memory objects: each call reads and writes that
// call's data (the objects follow it), and the thread does not keep the primitive alive once its
// owner lets it go.
TEST(ExecuteOnThisThread, EachCallUsesItsOwnDataAndKeepsNoPrimitiveAlive) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  struct Copy {
    dnnl::reorder primitive;
    dnnl::memory::desc from, to;
  };
  const dnnl::memory::desc from({2, 3}, dt::f32, tag::ab), to({2, 3}, dt::f32, tag::ba);
  auto owner = std::make_shared<const Copy>(Copy{dnnl::reorder(dnnl::reorder::primitive_desc(
                                                     onednn_cpu_engine(), from, onednn_cpu_engine(), to)),
                                                 from, to});
  const std::weak_ptr<const Copy> watched = owner;
  // Every call's buffers alive at once, so that no call's data sits where another's was.
  std::vector<std::vector<float>> ins(3, std::vector<float>(6)), outs(3, std::vector<float>(6, -1.f));
  for (size_t call = 0; call < ins.size(); ++call) {
    for (int i = 0; i < 6; ++i) ins[call][i] = 10.f * static_cast<float>(call) + static_cast<float>(i);
    execute_on_this_thread(owner, owner->primitive,
                           {{DNNL_ARG_FROM, nullptr, &owner->from, ins[call].data()},
                            {DNNL_ARG_TO, nullptr, &owner->to, outs[call].data()}});
  }
  for (size_t call = 0; call < ins.size(); ++call) {
    // [2, 3] row-major into column-major: out[c * 2 + r] = in[r * 3 + c].
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(outs[call][c * 2 + r], ins[call][r * 3 + c]) << call << " " << r << " " << c;
      }
    }
  }
  owner.reset();
  EXPECT_TRUE(watched.expired());
}
#endif

#include <gtest/gtest.h>

#if __has_include(<oneapi/dnnl/dnnl.hpp>)
#include "leanseq/kernels/onednn_engine.h"

using leanseq::kernels::PrimitiveCache;

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
#endif

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "leanseq/core/threads.h"

namespace {

// OpenBLAS's own count, or -1 when the BLAS behind LibTorch is not OpenBLAS.
int openblas_threads() {
  using GetThreads = int (*)();
  auto* f = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return f ? f() : -1;
}

TEST(ComputeThreads, OneThreadReachesAtenAndOpenBlas) {
  const int before = torch::get_num_threads();
  leanseq::set_compute_threads(1);
  EXPECT_EQ(torch::get_num_threads(), 1);
  const int blas = openblas_threads();
  leanseq::set_compute_threads(0);  // "0: their defaults" leaves the pools as they are
  EXPECT_EQ(torch::get_num_threads(), 1);
  leanseq::set_compute_threads(before);
  if (blas < 0) GTEST_SKIP() << "LibTorch does not call OpenBLAS here; ATen's count was checked";
  EXPECT_EQ(blas, 1) << "OpenBLAS kept its own thread count";
}

}  // namespace

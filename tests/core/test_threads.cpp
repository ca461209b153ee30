#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

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

// Where LibTorch counts fewer cores than the machine's (its cpuinfo does not know every CPU: one
// on a 2-core Zen 5 EPYC), a program starts with one thread per core; a count the user set stays.
TEST(ComputeThreads, ProgramsStartWithOneThreadPerCore) {
  const int cores = leanseq::cores_available();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  if (std::getenv("OMP_NUM_THREADS") || std::getenv("MKL_NUM_THREADS")) {
    GTEST_SKIP() << "OMP_NUM_THREADS or MKL_NUM_THREADS set: LibTorch follows it, and so does leanseq";
  }
  const int before = torch::get_num_threads();
  torch::set_num_threads(1);  // LibTorch's count where it sees one core
  leanseq::use_every_core_by_default();
  EXPECT_EQ(torch::get_num_threads(), cores);
  leanseq::set_compute_threads(1);  // the user's count
  leanseq::use_every_core_by_default();
  EXPECT_EQ(torch::get_num_threads(), 1);
  leanseq::set_compute_threads(before);
}

}  // namespace

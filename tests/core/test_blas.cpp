// The choice of OpenBLAS kernels (core/blas.h): which family is asked for, given what the library
// chose, what the CPU supports and what the user set; and that this very process, started through
// start_program(), runs the best family the CPU supports, and its OpenBLAS workers sleep after a product.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "leanseq/core/blas.h"
#include "leanseq/core/threads.h"

using leanseq::CpuVectorSupport;
using leanseq::openblas_coretype_to_request;

namespace {
CpuVectorSupport avx512() {
  CpuVectorSupport c;
  c.avx = c.avx2 = c.fma = true;
  c.avx512f = c.avx512bw = c.avx512vl = c.avx512dq = c.avx512cd = true;
  return c;
}
CpuVectorSupport avx2() {
  CpuVectorSupport c;
  c.avx = c.avx2 = c.fma = true;
  return c;
}
}  // namespace

TEST(Blas, AnAvx512CpuTakenForAnOlderCoreGetsSkylakeXKernels) {
  for (const char* taken : {"Prescott", "Core2", "Nehalem", "Sandybridge", "Haswell", "Zen"}) {
    EXPECT_EQ(openblas_coretype_to_request(taken, avx512(), nullptr), "SKYLAKEX") << taken;
  }
  for (const char* good : {"SkylakeX", "Cooperlake", "SapphireRapids"}) {
    EXPECT_EQ(openblas_coretype_to_request(good, avx512(), nullptr), "") << good;
  }
}

TEST(Blas, WhatTheCpuLacksIsNeverAskedFor) {
  EXPECT_EQ(openblas_coretype_to_request("Prescott", avx2(), nullptr), "HASWELL");
  EXPECT_EQ(openblas_coretype_to_request("Haswell", avx2(), nullptr), "");
  // One AVX-512 subset missing: no AVX-512 kernels.
  auto partial = avx512();
  partial.avx512bw = false;
  EXPECT_EQ(openblas_coretype_to_request("Prescott", partial, nullptr), "HASWELL");
  CpuVectorSupport sse;
  EXPECT_EQ(openblas_coretype_to_request("Prescott", sse, nullptr), "");
}

TEST(Blas, TheUsersSettingAndOtherLibrariesAreLeftAlone) {
  EXPECT_EQ(openblas_coretype_to_request("Prescott", avx512(), "PRESCOTT"), "");
  EXPECT_EQ(openblas_coretype_to_request("Prescott", avx512(), ""), "");
  EXPECT_EQ(openblas_coretype_to_request("", avx512(), nullptr), "");  // not OpenBLAS
}

TEST(Blas, ThisProcessRunsTheBestKernelsItsCpuSupports) {
  const std::string summary = leanseq::blas_summary();
  if (summary.rfind("BLAS: OpenBLAS", 0) != 0) GTEST_SKIP() << summary;
  const char* marker = std::getenv("LEANSEQ_SET_OPENBLAS_CORETYPE");
  if (std::getenv("OPENBLAS_CORETYPE") && !(marker && std::string(marker) == "1")) {
    GTEST_SKIP() << "OPENBLAS_CORETYPE was set by the user: " << summary;
  }
  // The kernel family in the summary is the one the library runs; nothing better is left to ask for.
  const auto from = summary.find(", ") + 2;
  const std::string core = summary.substr(from, summary.find(" kernels") - from);
  EXPECT_EQ(openblas_coretype_to_request(core, leanseq::detect_cpu_vector_support(), nullptr), "") << summary;
  std::cout << summary << "\n";
}

TEST(Blas, IdleThreadsSleepSoonUnlessTheUserSaidOtherwise) {
  using leanseq::thread_wait_settings;
  using Settings = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(thread_wait_settings(nullptr, nullptr, nullptr),
            (Settings{{"OPENBLAS_THREAD_TIMEOUT", "4"}, {"GOMP_SPINCOUNT", "10000"}}));
  EXPECT_EQ(thread_wait_settings("28", nullptr, nullptr), (Settings{{"GOMP_SPINCOUNT", "10000"}}));
  EXPECT_EQ(thread_wait_settings(nullptr, "0", nullptr), (Settings{{"OPENBLAS_THREAD_TIMEOUT", "4"}}));
  EXPECT_EQ(thread_wait_settings(nullptr, nullptr, "active"), (Settings{{"OPENBLAS_THREAD_TIMEOUT", "4"}}));
  EXPECT_EQ(thread_wait_settings("4", "1000", nullptr), Settings{});
  // This test program started through start_program(): both settings are in its environment,
  // and the start-up line reports them.
  EXPECT_NE(std::getenv("OPENBLAS_THREAD_TIMEOUT"), nullptr);
  EXPECT_TRUE(std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY"));
  EXPECT_NE(leanseq::blas_summary().find("idle threads: OPENBLAS_THREAD_TIMEOUT="), std::string::npos);
}

// What the settings are for, seen in the library itself: right after a product on two threads,
// OpenBLAS's worker goes to sleep instead of spinning for its default 2^28 cycles (about a tenth
// of a second), so the process uses almost no CPU time while the main thread sleeps.
TEST(Blas, OpenBlasWorkersSleepRightAfterAProduct) {
  if (leanseq::blas_summary().rfind("BLAS: OpenBLAS", 0) != 0) GTEST_SKIP() << leanseq::blas_summary();
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: OpenBLAS runs no worker thread";
  const char* timeout = std::getenv("OPENBLAS_THREAD_TIMEOUT");
  if (timeout && std::string(timeout) != "4") {
    GTEST_SKIP() << "OPENBLAS_THREAD_TIMEOUT=" << timeout << " set by the user";
  }
  leanseq::set_compute_threads(2);
  auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  const auto a = torch::rand({768, 768});
  double least = 1e9;  // over three rounds, so that nothing else the machine does can fail it
  for (int round = 0; round < 3; ++round) {
    const double sum = torch::mm(a, a).sum().item<double>();  // through OpenBLAS, on both threads
    ASSERT_GT(sum, 0.0);
    const double before = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    least = std::min(least, cpu_seconds() - before);
  }
  leanseq::set_compute_threads(0);
  EXPECT_LT(least, 0.04) << "CPU seconds used while the program slept after a product";
}

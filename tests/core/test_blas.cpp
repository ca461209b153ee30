// The choice of OpenBLAS kernels (core/blas.h): which family is asked for, given what the library
// chose, what the CPU supports and what the user set; and that this very process, started through
// start_program(), runs the best family the CPU supports.
#include <gtest/gtest.h>

#include <cstdlib>

#include "leanseq/core/blas.h"

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
            (Settings{{"OPENBLAS_THREAD_TIMEOUT", "4"}, {"GOMP_SPINCOUNT", "1000"}}));
  EXPECT_EQ(thread_wait_settings("28", nullptr, nullptr), (Settings{{"GOMP_SPINCOUNT", "1000"}}));
  EXPECT_EQ(thread_wait_settings(nullptr, "0", nullptr), (Settings{{"OPENBLAS_THREAD_TIMEOUT", "4"}}));
  EXPECT_EQ(thread_wait_settings(nullptr, nullptr, "active"), (Settings{{"OPENBLAS_THREAD_TIMEOUT", "4"}}));
  EXPECT_EQ(thread_wait_settings("4", "1000", nullptr), Settings{});
  // This test program started through start_program(): both settings are in its environment,
  // and the start-up line reports them.
  EXPECT_NE(std::getenv("OPENBLAS_THREAD_TIMEOUT"), nullptr);
  EXPECT_TRUE(std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY"));
  EXPECT_NE(leanseq::blas_summary().find("idle threads: OPENBLAS_THREAD_TIMEOUT="), std::string::npos);
}

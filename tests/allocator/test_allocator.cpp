// The programs' allocator (core/memory.h), in a test program linked as they are (to jemalloc,
// with the same malloc_conf): the freed memory it keeps serves later requests, so what the
// process maps stays bounded by what it once used.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "leanseq/core/memory.h"

namespace {

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

// jemalloc's count of the bytes the process has mapped for its allocations, refreshed.
size_t mapped_bytes(Mallctl mallctl) {
  uint64_t epoch = 1;
  size_t n = sizeof epoch;
  mallctl("epoch", &epoch, &n, &epoch, n);
  size_t mapped = 0;
  n = sizeof mapped;
  EXPECT_EQ(mallctl("stats.mapped", &mapped, &n, nullptr, 0), 0);
  return mapped;
}

// `count` blocks of `bytes` allocated, each written, then all freed: adjacent freed blocks merge
// into one region of count x bytes.
void allocate_and_free(size_t count, size_t bytes) {
  std::vector<void*> blocks(count);
  for (auto& b : blocks) {
    b = std::malloc(bytes);
    ASSERT_NE(b, nullptr);
    std::memset(b, 1, 4096);
    asm volatile("" : : "r"(b) : "memory");  // the allocation is used: not elided
  }
  for (void* b : blocks) std::free(b);
}

}  // namespace

TEST(Allocator, KeptMemoryServesLaterRequestsOfAnySize) {
  auto* mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl == nullptr) GTEST_SKIP() << "this program does not run on jemalloc (LEANSEQ_JEMALLOC=OFF)";
  ASSERT_NE(leanseq::allocator_summary().find("freed memory kept for reuse"), std::string::npos)
      << leanseq::allocator_summary();
  // A peak of 128 MiB in blocks of 1 MiB, freed: jemalloc keeps it as the regions it mapped for it,
  // the last ones tens of MiB each. Requests of 32 KiB must then be carved from them; jemalloc's
  // default took a kept region only for a request of at least 1/64 of it, and mapped a fresh,
  // ever larger region for each request that missed (leanseq's int8 decoding one sentence at a
  // time grew without end that way).
  constexpr size_t KiB = size_t{1} << 10, MiB = KiB << 10;
  allocate_and_free(128, MiB);
  const size_t after_peak = mapped_bytes(mallctl);
  allocate_and_free(1024, 32 * KiB);
  EXPECT_LT(mapped_bytes(mallctl), after_peak + 8 * MiB)
      << "mapped after the peak: " << after_peak / MiB << " MiB; " << leanseq::allocator_summary();
}

#include "leanseq/kernels/dropout.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <mutex>
#include <type_traits>

#include "leanseq/kernels/parallel.h"

namespace leanseq::kernels {

namespace {

// SplitMix64's finaliser: a bijective mix of a 64-bit counter.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// One hash gives the draws of two elements: 2k (its low 32 bits) and 2k + 1 (its high 32 bits).
inline uint64_t pair_draws(uint64_t seed, int64_t k) {
  return mix(seed + static_cast<uint64_t>(2 * k) * 0x9E3779B97F4A7C15ULL);
}

inline uint32_t threshold_of(double p) { return static_cast<uint32_t>(p * 4294967296.0); }

// The multipliers of pairs [k0, k0 + pairs) into out[0, 2 pairs). Compiled for AVX-512 with its
// 64-bit products (DQ), AVX2 and a baseline; the loop vectorises.
__attribute__((target_clones("arch=skylake-avx512", "avx2", "default"))) void pair_multipliers(
    uint64_t seed, uint32_t threshold, float keep, int64_t k0, int64_t pairs, float* __restrict out) {
#pragma omp simd
  for (int64_t k = 0; k < pairs; ++k) {
    const uint64_t r = pair_draws(seed, k0 + k);
    out[2 * k] = static_cast<uint32_t>(r) >= threshold ? keep : 0.f;
    out[2 * k + 1] = static_cast<uint32_t>(r >> 32) >= threshold ? keep : 0.f;
  }
}

template <class T>
void fill_mask(T* m, int64_t n, uint64_t seed, double p) {
  parallel_chunks(n, workers_for(n, 1 << 16), [&](int, int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      dropout_multipliers(seed, p, begin, end - begin, m + begin);
    } else {
      // The float multipliers (the vectorised loop) a block at a time, then in T: the same draws
      // and keep/drop as float's, keep rounded to T (bfloat16 under CPU autocast).
      constexpr int64_t kBlock = 1024;
      float block[kBlock];
      for (int64_t i = begin; i < end; i += kBlock) {
        const int64_t n = std::min(kBlock, end - i);
        dropout_multipliers(seed, p, i, n, block);
        for (int64_t j = 0; j < n; ++j) m[i + j] = static_cast<T>(block[j]);
      }
    }
  });
}

}  // namespace

void dropout_multipliers(uint64_t seed, double p, int64_t first, int64_t n, float* out) {
  if (n <= 0) return;
  const uint32_t threshold = threshold_of(p);
  const float keep = static_cast<float>(1.0 / (1.0 - p));
  int64_t i = first, end = first + n;
  float* o = out;
  if (i % 2) {  // an odd first element: the high half of its pair's draw
    *o++ = static_cast<uint32_t>(pair_draws(seed, i / 2) >> 32) >= threshold ? keep : 0.f;
    ++i;
  }
  const int64_t pairs = (end - i) / 2;
  pair_multipliers(seed, threshold, keep, i / 2, pairs, o);
  i += 2 * pairs, o += 2 * pairs;
  if (i < end) *o = static_cast<uint32_t>(pair_draws(seed, i / 2)) >= threshold ? keep : 0.f;
}

uint64_t dropout_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0) return x;
  if (p >= 1) return x * 0;
  if (!x.device().is_cpu()) return torch::dropout(x, p, training);
  auto mask = torch::empty(x.sizes(), x.options().requires_grad(false));
  const uint64_t seed = dropout_seed();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "leanseq_dropout", [&] {
    fill_mask(mask.data_ptr<scalar_t>(), mask.numel(), seed, p);
  });
  return x * mask;
}

}  // namespace leanseq::kernels

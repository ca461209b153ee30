#include "leanseq/kernels/dropout.h"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

#include "leanseq/kernels/parallel.h"

namespace leanseq::kernels {

namespace {

uint64_t draw_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

// SplitMix64's finaliser: a bijective mix of a 64-bit counter.
inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

template <class T>
void fill_mask(T* m, int64_t n, uint64_t seed, double p) {
  const auto threshold = static_cast<uint32_t>(p * 4294967296.0);
  const T keep = static_cast<T>(1.0 / (1.0 - p)), drop = static_cast<T>(0);
  parallel_chunks(n, workers_for(n, 1 << 16), [&](int, int64_t begin, int64_t end) {
    // Two 32-bit draws per hash; pairs start at even indices so that the split does not matter.
    for (int64_t i = begin & ~int64_t{1}; i < end; i += 2) {
      const uint64_t r = mix(seed + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ULL);
      if (i >= begin) m[i] = static_cast<uint32_t>(r) >= threshold ? keep : drop;
      if (i + 1 < end) m[i + 1] = static_cast<uint32_t>(r >> 32) >= threshold ? keep : drop;
    }
  });
}

}  // namespace

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0) return x;
  if (p >= 1) return x * 0;
  if (!x.device().is_cpu()) return torch::dropout(x, p, training);
  auto mask = torch::empty(x.sizes(), x.options().requires_grad(false));
  const uint64_t seed = draw_seed();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "leanseq_dropout", [&] {
    fill_mask(mask.data_ptr<scalar_t>(), mask.numel(), seed, p);
  });
  return x * mask;
}

}  // namespace leanseq::kernels

#include "leanseq/kernels/log_softmax.h"

#include <cmath>

#include "leanseq/kernels/parallel.h"

namespace leanseq::kernels {

namespace {

// One row: o = x - (max + log(sum(exp(x - max)))); o may be x. The exponentials are vectorised
// (libmvec under -ffast-math) for AVX-512, AVX2 and the baseline.
__attribute__((target_clones("avx512f", "avx2", "default"))) void log_softmax_row(const float* x, int64_t n,
                                                                                 float* o) {
  float max = x[0];
#pragma omp simd reduction(max : max)
  for (int64_t j = 0; j < n; ++j) max = x[j] > max ? x[j] : max;
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += std::exp(x[j] - max);
  const float lse = max + std::log(sum);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) o[j] = x[j] - lse;
}

}  // namespace

torch::Tensor log_softmax(torch::Tensor x) {
  const bool loop = x.is_cpu() && x.scalar_type() == torch::kFloat && x.dim() >= 1 && x.size(-1) > 0 &&
                    !(torch::GradMode::is_enabled() && x.requires_grad());
  if (!loop) return torch::log_softmax(x, -1, torch::kFloat);
  const bool own = x.is_contiguous() && x.use_count() == 1 && x.storage().use_count() == 1;
  const auto in = x.contiguous();
  auto out = own ? in : torch::empty(in.sizes(), in.options());
  const int64_t n = in.size(-1), rows = in.numel() / n;
  const float* xp = in.data_ptr<float>();
  float* op = out.data_ptr<float>();
  parallel_chunks(rows, workers_for(rows * n, 1 << 16), [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) log_softmax_row(xp + r * n, n, op + r * n);
  });
  return out;
}

}  // namespace leanseq::kernels

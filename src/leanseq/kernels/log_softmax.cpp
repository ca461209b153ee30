#include "leanseq/kernels/log_softmax.h"

#include <cmath>
#include <limits>

#include "leanseq/kernels/exp_avx512.h"
#include "leanseq/kernels/parallel.h"

namespace leanseq::kernels {

namespace {

// One row: o = x - (max + log(sum(exp(x - max)))); o may be x. The exponentials are vectorised
// (libmvec under -ffast-math) for AVX2 and the baseline.
__attribute__((target_clones("avx2", "default"))) void log_softmax_row_any(const float* x, int64_t n, float* o) {
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

#if defined(__x86_64__)
#define LEANSEQ_AVX512 __attribute__((target("avx512f")))
// GCC 12 takes the reductions' _mm512_undefined_ps() for an uninitialised variable.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// The same on AVX-512, its exponentials inline (exp_avx512.h) and summed in two registers of 16
// lanes, entries 32 j + l and 32 j + 16 + l in lane l of each, the last ones masked.
LEANSEQ_AVX512 void log_softmax_row_avx512(const float* x, int64_t n, float* o) {
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __mmask16 tail = static_cast<__mmask16>((1u << (n % 16)) - 1);
  const int64_t whole = n - n % 16;
  const float max = row_max_avx512(x, n);
  const __m512 shift = _mm512_set1_ps(max);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= whole; j += 32) {
    s0 = _mm512_add_ps(s0, exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + j), shift)));
    s1 = _mm512_add_ps(s1, exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), shift)));
  }
  if (j < whole) s0 = _mm512_add_ps(s0, exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + j), shift)));
  if (tail) {
    const __m512 last = _mm512_mask_loadu_ps(lowest, tail, x + whole);
    const __m512 e = exp_avx512(_mm512_sub_ps(last, shift));
    if (j < whole) {
      s1 = _mm512_add_ps(s1, e);
    } else {
      s0 = _mm512_add_ps(s0, e);
    }
  }
  const __m512 lse = _mm512_set1_ps(max + std::log(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1))));
  for (j = 0; j < whole; j += 16) _mm512_storeu_ps(o + j, _mm512_sub_ps(_mm512_loadu_ps(x + j), lse));
  if (tail) _mm512_mask_storeu_ps(o + whole, tail, _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + whole), lse));
}
#pragma GCC diagnostic pop
#undef LEANSEQ_AVX512

#endif

}  // namespace

void log_softmax_row(const float* x, int64_t n, float* o) {
#if defined(__x86_64__)
  if (avx512_available()) return log_softmax_row_avx512(x, n, o);
#endif
  log_softmax_row_any(x, n, o);
}

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

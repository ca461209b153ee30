#include "leanseq/kernels/softmax.h"

#include <cmath>
#include <limits>

#include "leanseq/kernels/exp_avx512.h"
#include "leanseq/kernels/parallel.h"

namespace leanseq::kernels {

namespace {

constexpr int64_t kLanes = 8;

// x = exp(x - max) over one block of kLanes entries, each added to its lane's sum: one compiled
// copy of the arithmetic (the vector exp), whichever block of a row it is. Compiled for AVX-512
// and AVX2 besides the baseline (chosen when the program starts).
__attribute__((noinline, target_clones("avx512f", "avx2", "default"))) void exp_block(float* __restrict x,
                                                                                      float max,
                                                                                      float* __restrict lanes) {
#pragma omp simd
  for (int64_t j = 0; j < kLanes; ++j) {
    x[j] = std::exp(x[j] - max);
    lanes[j] += x[j];
  }
}

__attribute__((target_clones("avx2", "default"))) void softmax_row_any(float* __restrict x, int64_t n) {
  float max = x[0];
#pragma omp simd reduction(max : max)
  for (int64_t j = 0; j < n; ++j) max = x[j] > max ? x[j] : max;
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) exp_block(x + j, max, lanes);
  if (j < n) {
    float tail[kLanes];
    for (int64_t i = 0; i < kLanes; ++i) tail[i] = j + i < n ? x[j + i] : -std::numeric_limits<float>::infinity();
    exp_block(tail, max, lanes);
    for (int64_t i = 0; j + i < n; ++i) x[j + i] = tail[i];
  }
  static_assert(kLanes == 8, "the sum below adds 8 lanes");
  const float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  const float inv = 1.f / sum;
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) x[k] *= inv;
}

#if defined(__x86_64__)
#define LEANSEQ_AVX512 __attribute__((target("avx512f")))
// GCC 12 takes the reductions' _mm512_undefined_ps() for an uninitialised variable.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// The same on AVX-512 in blocks of 16 (exp_avx512.h inline): entry 16 j + l in lane l, the last
// block masked with -inf.
LEANSEQ_AVX512 void softmax_row_avx512(float* __restrict x, int64_t n) {
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __mmask16 tail = static_cast<__mmask16>((1u << (n % 16)) - 1);
  const int64_t whole = n - n % 16;
  const __m512 max = _mm512_set1_ps(row_max_avx512(x, n));
  __m512 lanes = _mm512_setzero_ps();
  for (int64_t j = 0; j < whole; j += 16) {
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + j), max));
    _mm512_storeu_ps(x + j, e);
    lanes = _mm512_add_ps(lanes, e);
  }
  if (tail) {
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_mask_loadu_ps(lowest, tail, x + whole), max));
    _mm512_mask_storeu_ps(x + whole, tail, e);
    lanes = _mm512_add_ps(lanes, e);
  }
  const __m512 inv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(lanes));
  for (int64_t j = 0; j < whole; j += 16) _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), inv));
  if (tail) _mm512_mask_storeu_ps(x + whole, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + whole), inv));
}

// softmax_row_avx512 of a row of at most 16 entries held in one register (-inf past its end): the
// same operations in the same order, so the same bits.
__attribute__((target("avx512f"), always_inline)) inline __m512 softmax_16(__m512 x) {
  const __m512 e = exp_avx512(_mm512_sub_ps(x, _mm512_set1_ps(_mm512_reduce_max_ps(x))));
  const __m512 lanes = _mm512_add_ps(_mm512_setzero_ps(), e);
  return _mm512_mul_ps(e, _mm512_set1_ps(1.f / _mm512_reduce_add_ps(lanes)));
}

// `count` rows of n <= 16 entries, n apart: four at a time, whose four chains of dependent steps
// (maximum, exponentials, sum, division) the core overlaps where one row's would leave it waiting.
LEANSEQ_AVX512 void short_rows_avx512(float* __restrict x, int64_t n, int64_t count) {
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const auto in = static_cast<__mmask16>(n == 16 ? 0xffffu : (1u << n) - 1);
  int64_t r = 0;
  for (; r + 4 <= count; r += 4) {
    float* a = x + r * n;
    const __m512 y0 = softmax_16(_mm512_mask_loadu_ps(lowest, in, a));
    const __m512 y1 = softmax_16(_mm512_mask_loadu_ps(lowest, in, a + n));
    const __m512 y2 = softmax_16(_mm512_mask_loadu_ps(lowest, in, a + 2 * n));
    const __m512 y3 = softmax_16(_mm512_mask_loadu_ps(lowest, in, a + 3 * n));
    _mm512_mask_storeu_ps(a, in, y0);
    _mm512_mask_storeu_ps(a + n, in, y1);
    _mm512_mask_storeu_ps(a + 2 * n, in, y2);
    _mm512_mask_storeu_ps(a + 3 * n, in, y3);
  }
  for (; r < count; ++r) _mm512_mask_storeu_ps(x + r * n, in, softmax_16(_mm512_mask_loadu_ps(lowest, in, x + r * n)));
}
#pragma GCC diagnostic pop
#undef LEANSEQ_AVX512
#endif

}  // namespace

void softmax_row(float* __restrict x, int64_t n) {
#if defined(__x86_64__)
  if (avx512_available()) return softmax_row_avx512(x, n);
#endif
  softmax_row_any(x, n);
}

void softmax_rows(float* x, int64_t n, int64_t count) {
#if defined(__x86_64__)
  if (n <= 16 && avx512_available()) return short_rows_avx512(x, n, count);
#endif
  for (int64_t r = 0; r < count; ++r) softmax_row(x + r * n, n);
}

torch::Tensor fixed_order_softmax(const torch::Tensor& x) {
  if (!x.is_cpu() || x.scalar_type() != torch::kFloat || x.dim() == 0 || x.size(-1) == 0 ||
      (torch::GradMode::is_enabled() && x.requires_grad())) {
    return {};
  }
  auto out = x.clone(at::MemoryFormat::Contiguous);
  const int64_t n = out.size(-1), rows = out.numel() / n;
  float* p = out.data_ptr<float>();
  parallel_chunks(rows, workers_for(rows * n, 1 << 15), [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) softmax_row(p + r * n, n);
  });
  return out;
}

}  // namespace leanseq::kernels

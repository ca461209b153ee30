#include "leanseq/kernels/optimizer_step.h"

#include <algorithm>
#include <cmath>

#include "leanseq/kernels/parallel.h"

namespace leanseq::kernels {

namespace {

// Compiled for AVX2 and a baseline; the loops vectorise.
__attribute__((target_clones("avx2", "default"))) void adam_range(const AdamSpan& s, int64_t begin, int64_t end) {
  float* __restrict p = s.param;
  const float* __restrict g = s.grad;
  float* __restrict m = s.exp_avg;
  float* __restrict v = s.exp_avg_sq;
  const float b1 = s.beta1, b2 = s.beta2, c1 = 1.0f - s.beta1, c2 = 1.0f - s.beta2, wd = s.weight_decay;
  const float step = s.step_size, ibc2 = s.inv_sqrt_bias_correction2, eps = s.eps, gs = s.grad_scale;
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const float gi = gs * g[i] + wd * p[i];
    const float mi = b1 * m[i] + c1 * gi;
    const float vi = b2 * v[i] + c2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] -= step * mi / (std::sqrt(vi) * ibc2 + eps);
  }
}

__attribute__((target_clones("avx2", "default"))) void nag_range(const NagSpan& s, int64_t begin, int64_t end) {
  float* __restrict p = s.param;
  const float* __restrict g = s.grad;
  float* __restrict buf = s.momentum_buffer;
  const float pd = s.param_decay, bp = s.buf_in_param, gp = s.grad_in_param, bd = s.buf_decay, gb = s.grad_in_buf;
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const float b = buf[i], gi = g[i];
    p[i] = pd * p[i] + bp * b + gp * gi;
    buf[i] = bd * b + gb * gi;
  }
}

// Calls range(span, begin, end) over all spans' elements, split evenly over the compute threads
// (a worker's share may cross from one span into the next).
template <class Span, class Range>
void for_all_elements(const std::vector<Span>& spans, Range range) {
  int64_t total = 0;
  for (const auto& s : spans) total += s.n;
  // A worker gets at least 64k elements: below that a thread's start costs more than it saves.
  parallel_chunks(total, workers_for(total, int64_t{1} << 16), [&](int, int64_t begin, int64_t end) {
    int64_t offset = 0;
    for (const auto& s : spans) {
      if (offset >= end) break;
      const int64_t lo = std::max(begin, offset), hi = std::min(end, offset + s.n);
      if (lo < hi) range(s, lo - offset, hi - offset);
      offset += s.n;
    }
  });
}

}  // namespace

void adam_update(const std::vector<AdamSpan>& spans) { for_all_elements(spans, adam_range); }

void nag_update(const std::vector<NagSpan>& spans) { for_all_elements(spans, nag_range); }

}  // namespace leanseq::kernels

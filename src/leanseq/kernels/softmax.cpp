#include "leanseq/kernels/softmax.h"

#include <cmath>
#include <limits>

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

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void softmax_row(float* __restrict x, int64_t n) {
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

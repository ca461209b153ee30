#include "leanseq/kernels/bf16_rows.h"

#include <cstring>

namespace leanseq::kernels {

namespace {

inline uint16_t rounded(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(float));
  const uint32_t r = (bits + (((bits >> 16) & 1u) + 0x7FFFu)) >> 16;
  return x != x ? uint16_t{0x7FC0} : static_cast<uint16_t>(r);
}

// A bfloat16 value as the float32 it is exactly: its bits as the upper half.
inline float widened(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(float));
  return x;
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void widen_bf16_row(const uint16_t* __restrict in,
                                                                                 float* __restrict out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = widened(in[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void round_to_bf16_row(const float* __restrict in,
                                                                                    uint16_t* __restrict out,
                                                                                    int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = rounded(in[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void widen_bf16_rows(const uint16_t* const* in,
                                                                                  int64_t count, int64_t n,
                                                                                  float* __restrict out,
                                                                                  int64_t out_stride) {
  for (int64_t r = 0; r < count; ++r) {
    const uint16_t* __restrict row = in[r];
    float* __restrict o = out + r * out_stride;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = widened(row[i]);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void round_to_bf16_rows(const float* in, int64_t in_stride,
                                                                                     uint16_t* out, int64_t out_stride,
                                                                                     int64_t count, int64_t n) {
  for (int64_t r = 0; r < count; ++r) {
    const float* __restrict row = in + r * in_stride;
    uint16_t* __restrict o = out + r * out_stride;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = rounded(row[i]);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void add_bf16_row(const uint16_t* __restrict in,
                                                                              float* __restrict sums, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) sums[i] += widened(in[i]);
}

}  // namespace leanseq::kernels

// Shapes and weight strides shared by the dedicated lightconv kernels (CPU and CUDA); plain C++ so
// that nvcc compiles it without LibTorch.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define LEANSEQ_HOST_DEVICE __host__ __device__
#else
#define LEANSEQ_HOST_DEVICE
#endif

namespace leanseq::kernels {

struct LightconvShape {
  int64_t B, T, C, H, K, P;  // batch, time, channels, heads, taps, left padding
  int64_t R;                 // channels per head, C / H
  // Weight w[b, h, t, k] is at b * wb + h * wh + t * wt + k: dynamic weights are [B, H, T, K]
  // contiguous; lightweight weights [H, K] have wb = wt = 0.
  int64_t wb, wh, wt;
  LEANSEQ_HOST_DEVICE bool shared() const { return wb == 0 && wt == 0; }
  // Taps k with t + k - P inside [0, T) for output row t: [first, last).
  LEANSEQ_HOST_DEVICE int64_t tap_begin(int64_t t) const { return P - t > 0 ? P - t : 0; }
  LEANSEQ_HOST_DEVICE int64_t tap_end(int64_t t) const { return T + P - t < K ? T + P - t : K; }
  // Taps k for which input row s feeds output row t = s - k + P inside [0, T): [first, last).
  LEANSEQ_HOST_DEVICE int64_t src_tap_begin(int64_t s) const { return s + P - T + 1 > 0 ? s + P - T + 1 : 0; }
  LEANSEQ_HOST_DEVICE int64_t src_tap_end(int64_t s) const { return s + P + 1 < K ? s + P + 1 : K; }
};

}  // namespace leanseq::kernels

// CUDA kernels of the lightweight/dynamic convolution (semantics in kernels/lightconv.h).
// Forward and grad_x: one thread per (row, channel); neighbouring threads hold neighbouring
// channels, so every read of x, g and y is coalesced and the K taps of a row come from L1/L2.
// grad_w: one warp per (row, head) and tap; lanes stride over the head's channels and reduce with
// shuffles, writing every [B, H, T, K] entry exactly once (deterministic, no atomics).
#include "leanseq/kernels/cuda/lightconv_cuda.cuh"

namespace leanseq::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class S>
__global__ void forward_kernel(LightconvShape s, const S* __restrict__ x, const S* __restrict__ w, S* __restrict__ y) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= s.B * s.T * s.C) return;
  const int64_t c = idx % s.C, r = idx / s.C, b = r / s.T, t = r % s.T, h = c / s.R;
  const S* wr = w + b * s.wb + h * s.wh + t * s.wt;
  S acc = S(0);
  for (int64_t k = s.tap_begin(t); k < s.tap_end(t); ++k) acc += wr[k] * x[(b * s.T + t + k - s.P) * s.C + c];
  y[idx] = acc;
}

template <class S>
__global__ void grad_x_kernel(LightconvShape s, const S* __restrict__ g, const S* __restrict__ w, S* __restrict__ gx) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= s.B * s.T * s.C) return;
  const int64_t c = idx % s.C, r = idx / s.C, b = r / s.T, src = r % s.T, h = c / s.R;
  S acc = S(0);
  for (int64_t k = s.src_tap_begin(src); k < s.src_tap_end(src); ++k) {
    const int64_t t = src - k + s.P;
    acc += w[b * s.wb + h * s.wh + t * s.wt + k] * g[(b * s.T + t) * s.C + c];
  }
  gx[idx] = acc;
}

template <class S>
__global__ void grad_w_kernel(LightconvShape s, const S* __restrict__ g, const S* __restrict__ x, S* __restrict__ gw) {
  // One warp per (row, head, tap).
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= s.B * s.T * s.H * s.K) return;
  const int64_t k = warp % s.K, h = (warp / s.K) % s.H, r = warp / (s.K * s.H), b = r / s.T, t = r % s.T;
  S acc = S(0);
  if (k >= s.tap_begin(t) && k < s.tap_end(t)) {
    const S* go = g + r * s.C + h * s.R;
    const S* xh = x + (b * s.T + t + k - s.P) * s.C + h * s.R;
    for (int64_t i = lane; i < s.R; i += 32) acc += go[i] * xh[i];
  }
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if (lane == 0) gw[((b * s.H + h) * s.T + t) * s.K + k] = acc;
}

int64_t blocks_for(int64_t threads) { return (threads + kThreads - 1) / kThreads; }

}  // namespace

template <class S>
cudaError_t lightconv_forward(const LightconvShape& s, const S* x, const S* w, S* y, cudaStream_t stream) {
  const int64_t n = s.B * s.T * s.C;
  if (n == 0) return cudaSuccess;
  forward_kernel<S><<<blocks_for(n), kThreads, 0, stream>>>(s, x, w, y);
  return cudaGetLastError();
}

template <class S>
cudaError_t lightconv_grad_x(const LightconvShape& s, const S* g, const S* w, S* grad_x, cudaStream_t stream) {
  const int64_t n = s.B * s.T * s.C;
  if (n == 0) return cudaSuccess;
  grad_x_kernel<S><<<blocks_for(n), kThreads, 0, stream>>>(s, g, w, grad_x);
  return cudaGetLastError();
}

template <class S>
cudaError_t lightconv_grad_w(const LightconvShape& s, const S* g, const S* x, S* grad_w_full, cudaStream_t stream) {
  const int64_t warps = s.B * s.T * s.H * s.K;
  if (warps == 0) return cudaSuccess;
  grad_w_kernel<S><<<blocks_for(warps * 32), kThreads, 0, stream>>>(s, g, x, grad_w_full);
  return cudaGetLastError();
}

#define LEANSEQ_INSTANTIATE(S)                                                                           \
  template cudaError_t lightconv_forward<S>(const LightconvShape&, const S*, const S*, S*, cudaStream_t); \
  template cudaError_t lightconv_grad_x<S>(const LightconvShape&, const S*, const S*, S*, cudaStream_t);  \
  template cudaError_t lightconv_grad_w<S>(const LightconvShape&, const S*, const S*, S*, cudaStream_t);
LEANSEQ_INSTANTIATE(float)
LEANSEQ_INSTANTIATE(double)
#undef LEANSEQ_INSTANTIATE

}  // namespace leanseq::kernels::cuda

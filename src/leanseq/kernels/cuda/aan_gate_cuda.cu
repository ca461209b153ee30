// CUDA kernel of the average attention gate (semantics in kernels/aan_gate.h): one thread per
// output element; neighbouring threads hold neighbouring features, so every read is coalesced.
#include "leanseq/kernels/cuda/aan_gate_cuda.cuh"

namespace leanseq::kernels::cuda {

namespace {

constexpr int kThreads = 256;

__device__ inline float sigmoid(float v) { return 1.f / (1.f + __expf(-v)); }
__device__ inline double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

template <class S>
__global__ void gate_kernel(int64_t n, int64_t C, const S* __restrict__ z, const S* __restrict__ x,
                            const S* __restrict__ g, S* __restrict__ out) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  const int64_t r = idx / C, c = idx % C;
  const S* zr = z + 2 * C * r;
  out[idx] = sigmoid(zr[c]) * x[idx] + sigmoid(zr[C + c]) * g[idx];
}

}  // namespace

template <class S>
cudaError_t aan_gate(int64_t rows, int64_t C, const S* z, const S* x, const S* g, S* out, cudaStream_t stream) {
  const int64_t n = rows * C;
  if (n == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  gate_kernel<S><<<blocks, kThreads, 0, stream>>>(n, C, z, x, g, out);
  return cudaGetLastError();
}

template cudaError_t aan_gate<float>(int64_t, int64_t, const float*, const float*, const float*, float*, cudaStream_t);
template cudaError_t aan_gate<double>(int64_t, int64_t, const double*, const double*, const double*, double*,
                                      cudaStream_t);

}  // namespace leanseq::kernels::cuda

// CUDA kernel of the residual addition and LayerNorm (semantics in kernels/add_layer_norm.h): one
// warp per row. A lane reads the features lane, lane + 32, ... (neighbouring lanes, neighbouring
// addresses: coalesced), writes the sum to `out`, and reads back only what it wrote itself, so the
// three passes (sum, centred squares, normalise) need no synchronisation but the warp's shuffles.
#include "leanseq/kernels/cuda/add_layer_norm_cuda.cuh"

namespace leanseq::kernels::cuda {

namespace {

constexpr int kWarp = 32, kWarpsPerBlock = 4;

template <class S>
__device__ inline S warp_sum(S v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <class S>
__global__ void add_layer_norm_kernel(int64_t rows, int64_t C, const S* __restrict__ residual, const S* __restrict__ y,
                                      const S* __restrict__ weight, const S* __restrict__ bias, S eps,
                                      S* __restrict__ out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % kWarp;
  const S* r = residual + row * C;
  const S* v = y + row * C;
  S* o = out + row * C;
  S sum = 0;
  for (int64_t c = lane; c < C; c += kWarp) {
    const S s = r[c] + v[c];
    o[c] = s;
    sum += s;
  }
  const S mean = warp_sum(sum) / static_cast<S>(C);
  S squares = 0;
  for (int64_t c = lane; c < C; c += kWarp) {
    const S d = o[c] - mean;
    squares += d * d;
  }
  const S rstd = S(1) / sqrt(warp_sum(squares) / static_cast<S>(C) + eps);
  for (int64_t c = lane; c < C; c += kWarp) o[c] = (o[c] - mean) * rstd * weight[c] + bias[c];
}

}  // namespace

template <class S>
cudaError_t add_layer_norm(int64_t rows, int64_t C, const S* residual, const S* y, const S* weight, const S* bias,
                           double eps, S* out, cudaStream_t stream) {
  if (rows == 0 || C == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  add_layer_norm_kernel<S><<<blocks, kWarp * kWarpsPerBlock, 0, stream>>>(rows, C, residual, y, weight, bias,
                                                                          static_cast<S>(eps), out);
  return cudaGetLastError();
}

template cudaError_t add_layer_norm<float>(int64_t, int64_t, const float*, const float*, const float*, const float*,
                                           double, float*, cudaStream_t);
template cudaError_t add_layer_norm<double>(int64_t, int64_t, const double*, const double*, const double*,
                                            const double*, double, double*, cudaStream_t);

}  // namespace leanseq::kernels::cuda

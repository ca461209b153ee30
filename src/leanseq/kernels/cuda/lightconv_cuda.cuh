// Launchers of the CUDA lightconv kernels (lightconv_cuda.cu); raw device pointers, no LibTorch, so
// that nvcc compiles them alone. All tensors are contiguous: x, y, g, grad_x [B, T, C]; weights as
// described by LightconvShape; grad_w_full [B, H, T, K] (for shared weights the caller sums it over
// B and T).
#pragma once
#include <cuda_runtime.h>

#include "leanseq/kernels/lightconv_shape.h"

namespace leanseq::kernels::cuda {

template <class S>
cudaError_t lightconv_forward(const LightconvShape& s, const S* x, const S* w, S* y, cudaStream_t stream);
template <class S>
cudaError_t lightconv_grad_x(const LightconvShape& s, const S* g, const S* w, S* grad_x, cudaStream_t stream);
template <class S>
cudaError_t lightconv_grad_w(const LightconvShape& s, const S* g, const S* x, S* grad_w_full, cudaStream_t stream);

}  // namespace leanseq::kernels::cuda

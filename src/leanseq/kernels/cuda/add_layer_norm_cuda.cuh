// Launcher of the CUDA kernel of kernels::add_layer_norm (add_layer_norm_cuda.cu); raw device
// pointers, no LibTorch, so that nvcc compiles it alone. residual, y and out [rows, C], weight and
// bias [C], all contiguous.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace leanseq::kernels::cuda {

template <class S>
cudaError_t add_layer_norm(int64_t rows, int64_t C, const S* residual, const S* y, const S* weight, const S* bias,
                           double eps, S* out, cudaStream_t stream);

}  // namespace leanseq::kernels::cuda

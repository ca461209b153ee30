// Launcher of the CUDA kernel of kernels::aan_gate (aan_gate_cuda.cu); raw device pointers, no
// LibTorch, so that nvcc compiles it alone. z [rows, 2C], x, g and out [rows, C], all contiguous.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace leanseq::kernels::cuda {

template <class S>
cudaError_t aan_gate(int64_t rows, int64_t C, const S* z, const S* x, const S* g, S* out, cudaStream_t stream);

}  // namespace leanseq::kernels::cuda

// The end of a post-norm sublayer as one operator: LayerNorm(residual + y) over the last
// dimension, with the LayerNorm's weight and bias.
//
// Every Transformer sublayer (self-attention, encoder attention, average attention, FFN) ends
// with it; composed of ATen operators it is two (add, layer_norm), two kernel launches on a GPU,
// where a decoding step is bound by launches, and two passes over the data on a CPU.
#pragma once
#include <torch/torch.h>

namespace leanseq::kernels {

// residual, y: [..., C], one shape; weight, bias: [C]. When autograd records (training), the
// composite of ATen operators, which is differentiable. Otherwise one pass per row: float32 and
// float64 on the CPU, one kernel on CUDA when leanseq was built with -DLEANSEQ_CUDA=ON; the
// composite for other dtypes and devices.
torch::Tensor add_layer_norm(const torch::Tensor& residual, const torch::Tensor& y, const torch::Tensor& weight,
                             const torch::Tensor& bias, double eps);

// The composite form (the reference of the tests).
torch::Tensor add_layer_norm_reference(const torch::Tensor& residual, const torch::Tensor& y,
                                       const torch::Tensor& weight, const torch::Tensor& bias, double eps);

// Whether the CUDA kernel was built.
bool add_layer_norm_cuda_available();

}  // namespace leanseq::kernels

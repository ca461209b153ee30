// The gate of the average attention layer (nn/average_attention.h) as one operator. With
// z = gate([x ; g]) holding the input-gate logits in its first C features and the forget-gate
// logits in its last C: sigmoid(z_input) * x + sigmoid(z_forget) * g.
//
// A decoding step of an AAN decoder calls it once per layer. Composed of ATen operators it is
// four (sigmoid, chunk, mul, addcmul), four kernel launches on a GPU, where a step at decoding
// sizes is bound by launches; here it is one pass over the data.
#pragma once
#include <torch/torch.h>

namespace leanseq::kernels {

// z: [..., 2C]; x, g: [..., C], the same shape. When autograd records (training), the composite
// of ATen operators, which is differentiable. Otherwise one pass: a vectorised loop for float32
// and float64 on the CPU, one kernel on CUDA when leanseq was built with -DLEANSEQ_CUDA=ON; the
// composite for other dtypes and devices.
torch::Tensor aan_gate(const torch::Tensor& z, const torch::Tensor& x, const torch::Tensor& g);

// The composite form (the reference of the tests).
torch::Tensor aan_gate_reference(const torch::Tensor& z, const torch::Tensor& x, const torch::Tensor& g);

// Whether the CUDA kernel was built.
bool aan_gate_cuda_available();

}  // namespace leanseq::kernels

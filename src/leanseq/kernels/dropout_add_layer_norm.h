// The end of a post-norm sublayer in training as one differentiable operator:
// LayerNorm(residual + dropout(y)) over the last dimension.
//
// Composed of ATen operators, a training step spends four passes over the activation on it
// forward (drawing the mask, multiplying by it, adding, normalising) and keeps the mask and the
// sum for the backward pass. Here one pass per row draws the mask (the very mask kernels::dropout
// would draw from the same generator state), adds, normalises and keeps the normalised row and
// its 1/std; the backward pass redraws the mask from the seed instead of reading it back.
#pragma once
#include <torch/torch.h>

namespace leanseq::kernels {

// residual, y: [..., C], one shape; weight, bias: [C]; p: y's dropout probability, applied when
// `training`. When autograd records and all four are float32 CPU tensors, the fused operator
// (once differentiable; profilers see `leanseq::dropout_add_layer_norm`); otherwise
// add_layer_norm(residual, dropout(y, p, training), ...), the same result. y may also be bfloat16
// (a linear layer's result under `train --bf16`): the fused operator widens its rows as it reads
// them (where ATen would round y times the mask to bfloat16 first) and returns float32; y's
// gradient is computed in float32 and rounded to bfloat16 once.
torch::Tensor dropout_add_layer_norm(const torch::Tensor& residual, const torch::Tensor& y, double p, bool training,
                                     const torch::Tensor& weight, const torch::Tensor& bias, double eps);

}  // namespace leanseq::kernels

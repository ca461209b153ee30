// Batched matrix products of attention (scores = q k^T, context = p v) as one library call.
//
// ATen's CPU bmm runs one BLAS call per matrix of the batch: for a Transformer's attention at
// training sizes (96 sentences x 4 heads of 20 x 64 by 64 x 20) that is 384 calls, each paying a
// dispatch, two `select`s and the packing of its small operands, and a training step spent about
// a tenth of its time there (docs/performance.md). oneDNN's matmul primitive takes the whole
// batch, with any strides (so the views that split the heads need no copy), in one call.
// In training the forward and both gradients go through it. Inference keeps ATen's product, so that
// translations stay bit for bit what they were (oneDNN sums in another order: the last bits of a
// score differ); torch::matmul is also the reference of the tests.
#pragma once
#include <torch/torch.h>

namespace leanseq::kernels {

// a [..., M, K] times b [..., K, N], the same leading dimensions: [..., M, N]. Differentiable
// (once). When autograd records, float32 CPU tensors of 3 to 12 dimensions, any strides, go to
// oneDNN's matmul; anything else, or a build without oneDNN, takes torch::matmul.
torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace leanseq::kernels

// Fused log-softmax + label-smoothed cross-entropy (fairseq's criterion) as a custom autograd
// Function: one pass computes the per-row losses and the gradient with respect to the logits, so
// the [N, V] log-probabilities are never materialised. The plain-ATen reference is
// train::label_smoothed_nll_loss over log_softmax; tests hold the two together.
#pragma once
#include <torch/torch.h>

namespace leanseq::kernels {

struct CrossEntropyResult {
  torch::Tensor loss;  // scalar sum over non-ignored rows; differentiable w.r.t. logits
  torch::Tensor nll;   // scalar sum of the plain NLL (not differentiable)
};

// logits: [N, V] float32 or bfloat16 (CPU; CUDA logits take ATen's log-softmax instead; bfloat16
// rows are computed in float32 and their gradient is bfloat16, as a cast to float32 before the
// loss would give it); target: [N] int64. eps_i = eps / (V - 1);
// loss = sum_i (1 - eps - eps_i) * nll_i + eps_i * sum_v(-log p_iv), rows with target ==
// ignore_index contribute nothing.
// A model's logits in the type label_smoothed_cross_entropy takes them: CPU bfloat16 as they are
// (it widens each row itself), anything else as float32.
torch::Tensor cross_entropy_input(const torch::Tensor& logits);

CrossEntropyResult label_smoothed_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target, double eps,
                                                int64_t ignore_index);

}  // namespace leanseq::kernels

// Label-smoothed cross-entropy (fairseq's label_smoothed_nll_loss).
#pragma once
#include <torch/torch.h>

namespace leanseq::train {

struct LossResult {
  torch::Tensor loss;      // scalar: sum over non-ignored tokens
  torch::Tensor nll_loss;  // scalar: the plain negative log-likelihood, summed
};

// lprobs: [N, V] log-probabilities; target: [N]. eps_i = epsilon / (V - 1);
// loss = (1 - epsilon - eps_i) * nll + eps_i * sum_v(-lprobs); tokens equal to ignore_index count 0.
LossResult label_smoothed_nll_loss(const torch::Tensor& lprobs, const torch::Tensor& target, double epsilon,
                                   int64_t ignore_index);
// The same per token ([N]) without reduction.
LossResult label_smoothed_nll_loss_per_token(const torch::Tensor& lprobs, const torch::Tensor& target, double epsilon,
                                             int64_t ignore_index);

}  // namespace leanseq::train

#include "leanseq/train/criterion.h"

namespace leanseq::train {

LossResult label_smoothed_nll_loss_per_token(const torch::Tensor& lprobs, const torch::Tensor& target, double epsilon,
                                             int64_t ignore_index) {
  auto t = target.unsqueeze(-1);
  auto pad = target.eq(ignore_index);
  auto nll = -lprobs.gather(-1, t.clamp_min(0)).squeeze(-1);
  auto smooth = -lprobs.sum(-1);
  nll = nll.masked_fill(pad, 0.0);
  smooth = smooth.masked_fill(pad, 0.0);
  const double eps_i = epsilon / static_cast<double>(lprobs.size(-1) - 1);
  auto loss = nll * (1.0 - epsilon - eps_i) + smooth * eps_i;
  return {loss, nll};
}

LossResult label_smoothed_nll_loss(const torch::Tensor& lprobs, const torch::Tensor& target, double epsilon,
                                   int64_t ignore_index) {
  auto r = label_smoothed_nll_loss_per_token(lprobs, target, epsilon, ignore_index);
  return {r.loss.sum(), r.nll_loss.sum()};
}

}  // namespace leanseq::train

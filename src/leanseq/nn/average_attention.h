// The average attention layer of the Average Attention Network (Zhang et al. 2018), a drop-in for
// decoder self-attention: the cumulative average of the inputs so far, an optional position-wise
// FFN over it, and an input/forget gate that mixes it with the current input. Decoding keeps a
// running average, so each step costs O(1) in the target length.
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/incremental_state.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

class AverageAttentionImpl : public torch::nn::Module {
 public:
  // ffn_dim = 0: no FFN over the average (the paper's ablation).
  AverageAttentionImpl(int64_t embed_dim, int64_t ffn_dim, double activation_dropout);
  // x: [B, T, C]; padding: [B, T] bool (true at fed pads, which do not count) or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding);
  // The n new positions x [B, n, C] after those averaged in `cache`.
  torch::Tensor step(const torch::Tensor& x, const torch::Tensor& padding, AverageCache& cache);

  Linear fc1{nullptr}, fc2{nullptr};  // the FFN over the average (when ffn_dim > 0)
  Linear gate{nullptr};              // [x ; g] -> [input gate ; forget gate]

 private:
  // x and its running averages a (both [B, T, C]) -> the gated output.
  torch::Tensor mix(const torch::Tensor& x, const torch::Tensor& a);
  double activation_dropout_;
};
TORCH_MODULE(AverageAttention);

}  // namespace leanseq::nn

// The average attention layer of the Average Attention Network (Zhang et al. 2018), a drop-in for
// decoder self-attention: the cumulative average of the inputs so far, an optional position-wise
// FFN over it, and an input/forget gate that mixes it with the current input. Decoding keeps a
// running average, so each step costs O(1) in the target length.
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/derived_weight.h"
#include "leanseq/nn/incremental_state.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

class AverageAttentionImpl : public torch::nn::Module {
 public:
  // ffn_dim = 0: no FFN over the average (the paper's ablation). fold: decoding steps take the
  // folded products below.
  AverageAttentionImpl(int64_t embed_dim, int64_t ffn_dim, double activation_dropout, bool fold = false);
  // x: [B, T, C]; padding: [B, T] bool (true at fed pads, which do not count) or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding);
  // The n new positions x [B, n, C] after those averaged in `cache`.
  //
  // The folded step (one position, no pad fed, an FFN, no gradient recorded, float32 weights):
  // with the gate's weight split by its input, gate([x ; g]) = W_x x + W_g g + b, and
  // g = fc2(h) = W_2 h + b_2, the gate's g-part is (W_g W_2) h + W_g b_2: one product
  // [fc2 ; W_g fc2] of h gives g and it. fc1 is linear too, so fc1 of the running average is the
  // running average of fc1's products of the inputs, kept in the cache; [fc1 ; W_x] x then
  // gives that product and the gate's x-part in one. Two products per step instead of three (and
  // no concatenation), for more multiply-adds when the FFN is wider than the model (docs/san.md).
  torch::Tensor step(const torch::Tensor& x, const torch::Tensor& padding, AverageCache& cache);

  Linear fc1{nullptr}, fc2{nullptr};  // the FFN over the average (when ffn_dim > 0)
  Linear gate{nullptr};              // [x ; g] -> [input gate ; forget gate]

 private:
  // x and its running averages a (both [B, T, C]) -> the gated output.
  torch::Tensor mix(const torch::Tensor& x, const torch::Tensor& a);
  bool folds() const;
  torch::Tensor folded_step(const torch::Tensor& x, AverageCache& cache);
  double activation_dropout_;
  bool fold_;
  DerivedWeight fold_in_, fold_out_, fold_out_bias_;  // [fc1 ; W_x], [fc2 ; W_g fc2] and its bias
};
TORCH_MODULE(AverageAttention);

}  // namespace leanseq::nn

// DiSAN's building blocks (Shen et al., AAAI 2018): directional multi-dimensional self-attention
// with its fusion gate, and source2token multi-dimensional pooling. Tensors are batch-first;
// padding masks are [B, T] bool, true at pads.
#pragma once
#include <torch/torch.h>

#include <string>

#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

// [T, T] bool: true where query i may attend to key j. Forward: j < i; backward: j > i; the
// diagonal is excluded in both.
torch::Tensor directional_mask(int64_t length, bool forward, const torch::Device& device = torch::kCPU);

struct DirectionalAttentionResult {
  torch::Tensor out;    // [B, T, H], zero at pads
  torch::Tensor probs;  // [B, T, T, H] feature-wise attention over keys (zeros where masked), when asked
};

// One directional self-attention block (DiSA):
//   h = act(W_m x + b_m)
//   f(i, j) = 5 tanh((W_1 h_j + W_2 h_i + b) / 5)         (feature-wise logits, one per channel)
//   s_i = sum_j softmax_j(f(i, j) masked) * h_j            (per channel; a query with no key gets 0)
//   g = sigmoid(W_fh h + W_fs s + b_f);  out = g * h + (1 - g) * s
// Dropout (p) applies to h where it enters the attention and the gate, as in the reference code.
class DirectionalSelfAttentionImpl : public torch::nn::Module {
 public:
  DirectionalSelfAttentionImpl(int64_t in_dim, int64_t hidden, bool forward_direction, Activation activation,
                               double dropout);
  DirectionalAttentionResult forward(const torch::Tensor& x, const torch::Tensor& padding_mask,
                                     bool need_probs = false);
  Linear map{nullptr}, dependent{nullptr}, head{nullptr}, fusion_h{nullptr}, fusion_s{nullptr};
  torch::Tensor attn_bias;

 private:
  bool forward_;
  Activation activation_;
  double dropout_;
};
TORCH_MODULE(DirectionalSelfAttention);

// Source2token multi-dimensional attention: per channel, a softmax over positions of
// W_2 act(W_1 x + b_1) + b_2 weights the sum of x. x: [B, T, C] -> [B, C]; pads get weight 0 (an
// all-pad row gives zeros).
class Source2TokenImpl : public torch::nn::Module {
 public:
  Source2TokenImpl(int64_t dim, Activation activation, double dropout);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding_mask);
  // The per-channel weights [B, T, C] (each channel sums to 1 over the non-pad positions).
  torch::Tensor weights(const torch::Tensor& x, const torch::Tensor& padding_mask);
  Linear map1{nullptr}, map2{nullptr};

 private:
  Activation activation_;
  double dropout_;
};
TORCH_MODULE(Source2Token);

// The DiSA encoder of DiSAN: a forward and a backward block over the same input, concatenated
// per token ([B, T, 2H], zero at pads).
class DiSAEncoderImpl : public torch::nn::Module {
 public:
  DiSAEncoderImpl(int64_t in_dim, int64_t hidden, Activation activation, double dropout);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding_mask);
  DirectionalSelfAttention fw{nullptr}, bw{nullptr};
};
TORCH_MODULE(DiSAEncoder);

}  // namespace leanseq::nn

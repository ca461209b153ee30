#include "leanseq/nn/disan.h"

#include "leanseq/core/error.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

torch::Tensor directional_mask(int64_t length, bool forward, const torch::Device& device) {
  auto idx = torch::arange(length, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto query = idx.unsqueeze(1), key = idx.unsqueeze(0);
  return forward ? key.lt(query) : key.gt(query);
}

DirectionalSelfAttentionImpl::DirectionalSelfAttentionImpl(int64_t in_dim, int64_t hidden, bool forward_direction,
                                                           Activation activation, double dropout)
    : forward_(forward_direction), activation_(activation), dropout_(dropout) {
  map = register_module("map", make_linear(in_dim, hidden));
  dependent = register_module("dependent", make_linear(hidden, hidden, false));
  head = register_module("head", make_linear(hidden, hidden, false));
  attn_bias = register_parameter("attn_bias", torch::zeros({hidden}));
  fusion_h = register_module("fusion_h", make_linear(hidden, hidden));
  fusion_s = register_module("fusion_s", make_linear(hidden, hidden, false));
}

DirectionalAttentionResult DirectionalSelfAttentionImpl::forward(const torch::Tensor& x,
                                                                 const torch::Tensor& padding_mask, bool need_probs) {
  const int64_t T = x.size(1);
  auto keep = padding_mask.defined() ? padding_mask.logical_not() : torch::ones({x.size(0), T}, x.options().dtype(torch::kBool));
  auto h = activate(map(x), activation_);
  auto hd = maybe_dropout(h, dropout_, is_training());
  // logits[b, i, j, c] for query i and key j
  auto logits = dependent(hd).unsqueeze(1) + head(hd).unsqueeze(2) + attn_bias;
  logits = 5.0 * torch::tanh(logits / 5.0);
  auto allowed = directional_mask(T, forward_, x.device()).unsqueeze(0).logical_and(keep.unsqueeze(1));  // [B, T, T]
  auto allowed4 = allowed.unsqueeze(-1);
  auto probs = torch::softmax(logits.masked_fill(allowed4.logical_not(), kMaskedLogit), 2) * allowed4.to(x.dtype());
  auto s = (probs * h.unsqueeze(1)).sum(2);
  auto gate = torch::sigmoid(fusion_h(hd) + fusion_s(maybe_dropout(s, dropout_, is_training())));
  auto out = (gate * h + (1.0 - gate) * s) * keep.unsqueeze(-1).to(x.dtype());
  return {out, need_probs ? probs : torch::Tensor()};
}

Source2TokenImpl::Source2TokenImpl(int64_t dim, Activation activation, double dropout)
    : activation_(activation), dropout_(dropout) {
  map1 = register_module("map1", make_linear(dim, dim));
  map2 = register_module("map2", make_linear(dim, dim));
}

torch::Tensor Source2TokenImpl::weights(const torch::Tensor& x, const torch::Tensor& padding_mask) {
  auto logits = map2(maybe_dropout(activate(map1(maybe_dropout(x, dropout_, is_training())), activation_),
                                   dropout_, is_training()));
  if (!padding_mask.defined()) return torch::softmax(logits, 1);
  auto pads = padding_mask.unsqueeze(-1);
  return torch::softmax(logits.masked_fill(pads, kMaskedLogit), 1).masked_fill(pads, 0.0);
}

torch::Tensor Source2TokenImpl::forward(const torch::Tensor& x, const torch::Tensor& padding_mask) {
  return (weights(x, padding_mask) * x).sum(1);
}

DiSAEncoderImpl::DiSAEncoderImpl(int64_t in_dim, int64_t hidden, Activation activation, double dropout) {
  fw = register_module("fw", DirectionalSelfAttention(in_dim, hidden, true, activation, dropout));
  bw = register_module("bw", DirectionalSelfAttention(in_dim, hidden, false, activation, dropout));
}

torch::Tensor DiSAEncoderImpl::forward(const torch::Tensor& x, const torch::Tensor& padding_mask) {
  return torch::cat({fw(x, padding_mask).out, bw(x, padding_mask).out}, -1);
}

}  // namespace leanseq::nn

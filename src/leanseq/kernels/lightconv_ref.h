// Reference implementations (plain ATen) of the 1D convolutions of "Pay Less Attention with
// Lightweight and Dynamic Convolutions" (Wu et al. 2019), in one semantics for both kinds:
//
//   y[b, t, c] = sum_k w[b, h(c), t, k] * x[b, t + k - padding_l, c],  h(c) = c / (C / H),
//
// with zeros outside [0, T). The weights w are already normalised over the K taps (softmax over
// all K, then applied; when K > T the taps that fall outside the sequence multiply zeros), which
// is fairseq's band-matrix ("expanded") path and its incremental decoding. Lightweight
// convolution shares one kernel per head over all positions; dynamic convolution predicts one per
// position. These are the references that faster kernels are tested against.
#pragma once
#include <torch/torch.h>

namespace leanseq::kernels {

// x: [B, T, C]; weights: [B, H, T, K] (may be an expanded view); returns [B, T, C].
// Unfold formulation: a [B, T, C, K] window view of the padded input, weighted and summed.
torch::Tensor lightconv_unfold(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l);

// Band-matrix formulation: per (batch, head) a [T, T] band matrix times the [T, C/H] input block.
torch::Tensor lightconv_band(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l);

// Causal (padding_l = K - 1) convolution of n new positions given the K - 1 inputs before them
// (`window`, [B, K-1, C]; zeros before the sequence start): the incremental-decoding form of the
// same semantics. weights: [B, H, n, K]. Returns the outputs [B, n, C] and the new window (the
// last K - 1 inputs). Any n >= 1 works, so chunks of several tokens decode exactly.
std::pair<torch::Tensor, torch::Tensor> lightconv_causal_step(const torch::Tensor& window, const torch::Tensor& x_new,
                                                              const torch::Tensor& weights);

// Lightweight weights: softmax over K of `weight` ([H, K] or fairseq's [H, 1, K]), expanded to
// [B, H, T, K] without copying.
torch::Tensor lightweight_weights(const torch::Tensor& weight, int64_t B, int64_t T);

// Dynamic weights from per-position logits [B, T, H * K] (row h * K + k): softmax over K,
// returned as [B, H, T, K].
torch::Tensor dynamic_weights(const torch::Tensor& logits, int64_t heads);

}  // namespace leanseq::kernels

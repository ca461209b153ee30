// The layers of ConvS2S (Gehring et al. 2017; fairseq fconv.py, modules/conv_tbc.py,
// linearized_convolution.py): weight-normalised linear and time-major convolution layers with
// fairseq's dropout-aware initialisation, the gradient scaling of the encoder output, and the
// multi-step attention of the decoder. Parameter names are fairseq's (weight_g, weight_v, bias).
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/derived_weight.h"
#include "leanseq/nn/incremental_state.h"
#include "leanseq/nn/packed_weight.h"

namespace leanseq::nn {

// Identity forward; multiplies the gradient by `scale` (fairseq's GradMultiply).
torch::Tensor grad_multiply(const torch::Tensor& x, double scale);

// weight = weight_g * weight_v / ||weight_v||, the norm over every dimension but `dim`
// (torch.nn.utils.weight_norm).
torch::Tensor weight_norm(const torch::Tensor& v, const torch::Tensor& g, int64_t dim);

// fairseq fconv's Linear: weight_v ~ N(0, sqrt((1 - dropout) / in)), weight_g = ||weight_v|| per
// output row, zero bias. x: [..., in] -> [..., out].
class WeightNormLinearImpl : public torch::nn::Module, public LowPrecision {
 public:
  WeightNormLinearImpl(int64_t in, int64_t out, double dropout = 0.0);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight() const { return weight_norm(weight_v, weight_g, 0); }
  void set_compute_type(kernels::ComputeType type) override { packed_.pack(weight(), bias, type); }
  const PackedWeight& packed() const { return packed_; }
  torch::Tensor weight_g, weight_v, bias;  // [out, 1], [out, in], [out]

 private:
  DerivedWeight normalised_;  // weight()
  PackedWeight packed_;
};
TORCH_MODULE(WeightNormLinear);

// A weight-normalised convolution over time in fairseq's ConvTBC layout: weight [K, Cin, Cout],
// normalised over (K, Cin) per output channel; init N(0, sqrt(4 (1 - dropout) / (K Cin))).
// forward() takes time-major input [T, B, Cin] and pads `padding_l` zeros before and
// `padding_r` after the sequence; step() is the decoder's linearized form (causal, padding_l =
// K - 1): batch-major new inputs [B, n, Cin] against the last K - 1 inputs kept in `cache`,
// with the weight flattened to [Cout, K * Cin] once while the weights do not change. At inference
// on the CPU (float32, no gradient recorded) forward() multiplies every window the same way, so a
// sentence's output is the same bits alone and padded in a batch; training takes ATen's conv_tbc.
class ConvTBCImpl : public torch::nn::Module, public LowPrecision {
 public:
  ConvTBCImpl(int64_t in, int64_t out, int64_t kernel_size, double dropout = 0.0);
  torch::Tensor forward(const torch::Tensor& x, int64_t padding_l, int64_t padding_r);
  torch::Tensor step(const torch::Tensor& x, ConvWindowCache& cache);
  int64_t kernel_size() const { return kernel_size_; }
  // forward() and step() then multiply each window by the packed linearized weight.
  void set_compute_type(kernels::ComputeType type) override;
  torch::Tensor weight_g, weight_v, bias;  // [1, 1, Cout], [K, Cin, Cout], [Cout]

 private:
  torch::Tensor linearized_weight();
  // Each window of K positions of `full` [B, L, Cin] times the linearized weight: [B, L - K + 1, Cout].
  torch::Tensor window_products(const torch::Tensor& full);
  int64_t kernel_size_;
  DerivedWeight linearized_;  // [Cout, K * Cin]
  PackedWeight packed_;  // of the linearized weight
};
TORCH_MODULE(ConvTBC);

// A linear layer whose weight is another module's tensor (fconv's output layer tied to the
// decoder's input embedding): fairseq's nn.Linear bias init U(-1/sqrt(in), 1/sqrt(in)).
class TiedLinearImpl : public torch::nn::Module, public LowPrecision {
 public:
  explicit TiedLinearImpl(const torch::Tensor& tied_weight);
  torch::Tensor forward(const torch::Tensor& x) { return linear(x, weight, bias, packed_); }
  void set_compute_type(kernels::ComputeType type) override { packed_.pack(weight, bias, type); }
  const PackedWeight& packed() const { return packed_; }
  torch::Tensor weight, bias;  // [out, in] (shared), [out]

 private:
  PackedWeight packed_;
};
TORCH_MODULE(TiedLinear);

struct FConvAttentionResult {
  torch::Tensor out;   // [B, T, C]
  torch::Tensor attn;  // [B, T, S]
};

// One step of ConvS2S's multi-step attention. x: the decoder layer's state [B, T, C];
// target_embedding [B, T, E]; keys, values: the encoder's two outputs [B, S, E]; padding_mask
// [B, S] (true at pads; undefined when there are none). The query is (in_projection(x) +
// target_embedding) sqrt(0.5); the context is rescaled by sqrt(number of real source tokens); the
// output is (out_projection(context) + x) sqrt(0.5).
class FConvAttentionImpl : public torch::nn::Module {
 public:
  FConvAttentionImpl(int64_t conv_channels, int64_t embed_dim);
  FConvAttentionResult forward(const torch::Tensor& x, const torch::Tensor& target_embedding, const torch::Tensor& keys,
                               const torch::Tensor& values, const torch::Tensor& padding_mask);
  WeightNormLinear in_projection{nullptr}, out_projection{nullptr};
};
TORCH_MODULE(FConvAttention);

}  // namespace leanseq::nn

// Lightweight and dynamic convolution modules and the LightConv encoder/decoder layers of fairseq's
// lightconv.py (Wu et al. 2019), under fairseq's parameter names so its weights load directly.
#pragma once
#include <torch/torch.h>

#include "leanseq/kernels/lightconv.h"
#include "leanseq/nn/attention.h"
#include "leanseq/nn/incremental_state.h"

namespace leanseq::nn {

struct LightConvOptions {
  int64_t channels = 512, kernel_size = 3, padding_l = 1, heads = 8;
  bool dynamic = true;          // dynamic (per-position kernels) or lightweight (one kernel per head)
  bool weight_softmax = true;   // softmax over the K taps
  double weight_dropout = 0.0;  // DropConnect on the normalised kernels
  bool bias = false;            // a per-channel bias after the convolution
  kernels::LightconvImpl impl = kernels::LightconvImpl::kAuto;
};

// Lightweight: parameter `weight` [H, 1, K] (+ `bias` [C]); dynamic: `weight_linear` (C -> H * K,
// no bias) predicts each position's kernels from its input (+ `conv_bias` [C]). x: [B, T, C].
class LightConv1dImpl : public torch::nn::Module {
 public:
  explicit LightConv1dImpl(const LightConvOptions& o);
  torch::Tensor forward(const torch::Tensor& x);
  // Causal convolution (padding_l = K - 1) of n new positions x_new [B, n, C], given the last K - 1
  // inputs in `cache` (zeros before the sequence start); keeps the new last K - 1.
  torch::Tensor step(const torch::Tensor& x_new, ConvWindowCache& cache);
  const LightConvOptions& options() const { return o_; }

  torch::Tensor weight, bias, conv_bias;
  Linear weight_linear{nullptr};

 private:
  // Normalised kernels: [H, K] (lightweight) or [B, H, T, K] (dynamic).
  torch::Tensor kernels_for(const torch::Tensor& x);
  torch::Tensor add_bias(torch::Tensor y) const;
  LightConvOptions o_;
};
TORCH_MODULE(LightConv1d);

struct LightConvLayerOptions {
  int64_t embed_dim = 512, conv_dim = 512, ffn_dim = 2048, heads = 8, kernel_size = 3;
  bool dynamic = true, glu = true, normalize_before = false, weight_softmax = true;
  bool encoder_attention = true;  // false in a decoder-only language model
  double dropout = 0.1, relu_dropout = 0.0, input_dropout = 0.1, weight_dropout = 0.0, attention_dropout = 0.0;
  kernels::LightconvImpl impl = kernels::LightconvImpl::kAuto;
};

// Encoder layer: [LN] -> input dropout -> linear1 (to 2 * conv_dim + GLU, or conv_dim) -> pads
// zeroed -> conv (padding (K - 1) / 2) -> linear2 -> dropout -> + residual -> [LN]; then the FFN.
// LayerNorms: layer_norm1 (conv block), layer_norm2 (FFN).
class LightConvEncoderLayerImpl : public torch::nn::Module {
 public:
  explicit LightConvEncoderLayerImpl(const LightConvLayerOptions& o);
  // x: [B, S, C]; padding_mask: [B, S] bool (true at pads) or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding_mask);
  Linear linear1{nullptr}, linear2{nullptr}, fc1{nullptr}, fc2{nullptr};
  LightConv1d conv{nullptr};
  torch::nn::LayerNorm layer_norm1{nullptr}, layer_norm2{nullptr};

 private:
  LightConvLayerOptions o_;
};
TORCH_MODULE(LightConvEncoderLayer);

// Decoder layer: the same conv block made causal (padding K - 1; conv_layer_norm), then
// encoder-decoder attention (encoder_attn, encoder_attn_layer_norm; absent in a language model),
// then the FFN (final_layer_norm).
class LightConvDecoderLayerImpl : public torch::nn::Module {
 public:
  explicit LightConvDecoderLayerImpl(const LightConvLayerOptions& o);
  // x: [B, T, C]; memory: [B, S, C]. Returns output and, when asked, the encoder attention
  // averaged over heads [B, T, S].
  AttentionResult forward(const torch::Tensor& x, const torch::Tensor& memory, const torch::Tensor& memory_padding_mask,
                          bool need_attn);
  // Names this layer's caches in an IncrementalState: <name>.conv (the conv's last K - 1 inputs)
  // and <name>.encoder_attn (encoder keys/values); its owner calls it with the layer's path.
  void name_state(const std::string& name);
  // n new positions x [B, n, C]; reads and extends the layer's caches in `state`.
  AttentionResult step(const torch::Tensor& x, const torch::Tensor& memory, const torch::Tensor& memory_padding_mask,
                       IncrementalState& state, bool need_attn);
  Linear linear1{nullptr}, linear2{nullptr}, fc1{nullptr}, fc2{nullptr};
  LightConv1d conv{nullptr};
  MultiheadAttention encoder_attn{nullptr};
  torch::nn::LayerNorm conv_layer_norm{nullptr}, encoder_attn_layer_norm{nullptr}, final_layer_norm{nullptr};

 private:
  AttentionResult after_conv(const torch::Tensor& x, const std::function<AttentionResult(const torch::Tensor&)>& attend);
  LightConvLayerOptions o_;
  std::string conv_state_, cross_state_;  // cache names (name_state)
};
TORCH_MODULE(LightConvDecoderLayer);

}  // namespace leanseq::nn

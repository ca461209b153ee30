// Transformer encoder and decoder layers (fairseq's TransformerEncoderLayer/DecoderLayer), post-norm
// by default, pre-norm with normalize_before; with the attention sharing of SAN (Xiao et al. 2019)
// and the average attention of AAN (Zhang et al. 2018) as options.
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/attention.h"
#include "leanseq/nn/average_attention.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/incremental_state.h"

namespace leanseq::nn {

struct TransformerLayerOptions {
  int64_t embed_dim = 512, ffn_dim = 2048, heads = 8;
  int64_t encoder_embed_dim = 0;  // decoder: the encoder output's width (0: embed_dim)
  double dropout = 0.1, attention_dropout = 0.0, activation_dropout = 0.0;
  bool normalize_before = false;
  Activation activation = Activation::relu;  // relu | gelu | gelu_tanh | swish
  // SAN: this layer applies the self-attention distribution of its block's first layer to its own
  // values (it has no q_proj/k_proj) ...
  bool reuse_self_attn = false;
  // ... and (decoder) adds its block's first layer's encoder-attention output instead of
  // computing one (it has no encoder_attn).
  bool reuse_encoder_attn = false;
  // A language model's decoder layer: no encoder-decoder attention sublayer at all.
  bool no_encoder_attn = false;
  // AAN (decoder): average attention replaces self-attention; the FFN over the average has
  // average_ffn_dim inner units (0: none).
  bool average_self_attn = false;
  int64_t average_ffn_dim = 0;
  bool average_fold = false;  // AverageAttentionImpl's folded decoding step
};

// What the first layer of a SAN block hands to the later layers of the block during one pass.
struct SharedAttention {
  torch::Tensor self_probs;  // [B, H, T, T'] self-attention distribution
  AttentionResult encoder;   // encoder-decoder attention output, distribution and weights
};

// The position-wise feed-forward sublayer with residual and LayerNorm (fc1, fc2, final_layer_norm
// are members of the layers themselves, under fairseq's names). x: [B, T, C].
torch::Tensor feed_forward(const torch::Tensor& x, Linear& fc1, Linear& fc2,
                           torch::nn::LayerNorm& norm, const TransformerLayerOptions& o, bool training);

class TransformerEncoderLayerImpl : public torch::nn::Module {
 public:
  explicit TransformerEncoderLayerImpl(const TransformerLayerOptions& o);
  // x: [B, S, C]; padding_mask: [B, S] bool or undefined. Reads or writes shared.self_probs.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding_mask, SharedAttention& shared);
  MultiheadAttention self_attn{nullptr};
  torch::nn::LayerNorm self_attn_layer_norm{nullptr};
  Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::LayerNorm final_layer_norm{nullptr};

 private:
  TransformerLayerOptions o_;
};
TORCH_MODULE(TransformerEncoderLayer);

class TransformerDecoderLayerImpl : public torch::nn::Module {
 public:
  explicit TransformerDecoderLayerImpl(const TransformerLayerOptions& o);
  // Teacher-forced: x [B, T, C], memory [B, S, C]. Returns output and, when asked, the
  // encoder attention averaged over heads [B, T, S] (a layer that reuses its block's encoder
  // attention returns the block's). Reads or writes `shared`.
  AttentionResult forward(const torch::Tensor& x, const torch::Tensor& self_padding_mask,
                          const torch::Tensor& memory, const torch::Tensor& memory_padding_mask,
                          bool need_attn, SharedAttention& shared);
  // Names this layer's caches in an IncrementalState: <name>.self_attn and <name>.encoder_attn
  // (its owner calls it with the layer's path, e.g. "layers.2").
  void name_state(const std::string& name);
  // Incremental: x [B, n, C] for the n new positions (token_padding [B, n] bool or undefined);
  // reads and extends the layer's caches in `state`.
  AttentionResult step(const torch::Tensor& x, const torch::Tensor& token_padding, const torch::Tensor& memory,
                       const torch::Tensor& memory_padding_mask, IncrementalState& state, bool need_attn,
                       SharedAttention& shared);
  MultiheadAttention self_attn{nullptr}, encoder_attn{nullptr};  // absent when averaged / reused / none
  AverageAttention avg_attn{nullptr};                            // AAN
  torch::nn::LayerNorm self_attn_layer_norm{nullptr}, encoder_attn_layer_norm{nullptr};
  Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::LayerNorm final_layer_norm{nullptr};

 private:
  template <class Attend>
  torch::Tensor residual_block(const torch::Tensor& x, torch::nn::LayerNorm& norm, Attend&& attend);
  // The encoder-attention sublayer's input -> its result: the shared one, or computed by
  // `attend` and handed on.
  template <class Attend>
  AttentionResult encoder_attention(SharedAttention& shared, Attend&& attend);
  TransformerLayerOptions o_;
  std::string self_state_, cross_state_;  // cache names (name_state)
};
TORCH_MODULE(TransformerDecoderLayer);

}  // namespace leanseq::nn

// The Transformer encoder-decoder (Vaswani et al. 2017), faithful to fairseq's TransformerModel:
// parameter names match fairseq's state_dict keys, so fairseq weights load directly. Options:
// attention shared within blocks of layers (SAN, Xiao et al. 2019) and the Average Attention
// Network decoder (AAN, Zhang et al. 2018); see docs/san.md.
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/packed_weight.h"

#include "leanseq/models/encoder_decoder.h"
#include "leanseq/models/a2_blocks.h"
#include "leanseq/models/seq2seq.h"
#include "leanseq/nn/disan.h"
#include "leanseq/nn/embeddings.h"
#include "leanseq/nn/transformer_layer.h"

namespace leanseq::models {

class Registry;

struct TransformerSideConfig {
  int64_t embed_dim = 512, ffn_embed_dim = 2048, layers = 6, attention_heads = 8;
  bool normalize_before = false, learned_pos = false;
  std::string self_attn_groups;     // SAN blocks of self-attention ("0-1,2-5"; empty: none shared)
  std::string encoder_attn_groups;  // decoder only: SAN blocks of encoder-decoder attention
  bool average_attention = false;   // decoder only: AAN instead of self-attention
  bool average_attention_ffn = true;  // decoder only: the FFN over the average (ffn_embed_dim wide)
  bool average_attention_fold = false;  // decoder only: decoding steps fold the gate into the FFN's products
  int64_t output_dim = 0;  // decoder only: fairseq's decoder_output_dim, projected to before the output (0: embed_dim)
  // language model only: fairseq's decoder_input_dim, the embeddings' width, projected to
  // embed_dim after scaling (0: embed_dim)
  int64_t input_dim = 0;
  bool output_bias = false;  // decoder only: a bias on the output projection (OpenNMT-py's generator)
  // decoder only: the layer whose encoder attention gives alignments (negative: counted from the
  // last, -1 the last) and how many of its first heads are averaged (0: all), as fairseq's
  // alignment_layer/alignment_heads and CTranslate2's.
  int64_t alignment_layer = -1, alignment_heads = 0;
  A2Blocks a2;  // A2 double-attention blocks after some layers (causal in the decoder)
};

struct TransformerConfig : ModelConfig {
  TransformerSideConfig encoder, decoder;
  // transformer, or disan: DiSAN's forward and backward directional self-attention blocks
  // (encoder.embed_dim / 2 each, concatenated) replace the encoder layers; no positions.
  std::string encoder_type = "transformer";
  double dropout = 0.1, attention_dropout = 0.0, activation_dropout = 0.0;
  std::string activation_fn = "relu";
  bool share_decoder_input_output_embed = false, share_all_embeddings = false, no_scale_embedding = false;
  bool layernorm_embedding = false;  // fairseq's: LayerNorm over embeddings + positions, both sides
  int64_t max_source_positions = 1024, max_target_positions = 1024;
  bool decoder_only = false;  // set by TransformerLMConfig: decoder layers without encoder attention

  void visit(ConfigVisitor& v) override;
  std::string family() const override { return "transformer"; }
  std::shared_ptr<ModelConfig> clone() const override { return std::make_shared<TransformerConfig>(*this); }
  std::string summary() const override;
  void validate() const override;
  // Options shared by every layer of a side.
  nn::TransformerLayerOptions side_options(const TransformerSideConfig& side) const;
  // Options of every layer of `side` ("encoder" or "decoder"), with each layer's SAN role.
  std::vector<nn::TransformerLayerOptions> layer_options(const std::string& side) const;
};

// fairseq's transformer_lm: the Transformer decoder without encoder attention, trained as a
// language model. Only the decoder.* keys and the shared options are configurable; pre-norm is
// the default, as fairseq forces it ("model training is not stable without this"), with the final
// LayerNorm.
struct TransformerLMConfig : TransformerConfig {
  TransformerLMConfig();
  void visit(ConfigVisitor& v) override;
  std::string family() const override { return "transformer_lm"; }
  std::shared_ptr<ModelConfig> clone() const override { return std::make_shared<TransformerLMConfig>(*this); }
  std::string summary() const override;
  void validate() const override;
  bool language_model() const override { return true; }
  // The width of the token embeddings (decoder.input_dim, or decoder.embed_dim).
  int64_t embedding_dim() const { return decoder.input_dim > 0 ? decoder.input_dim : decoder.embed_dim; }
};

// The attention distributions of every layer in one teacher-forced pass (SAN analysis), each
// [B, H, T, S]; decoder self-attention is absent with average attention.
struct AttentionMaps {
  std::vector<torch::Tensor> encoder_self, decoder_self, encoder_decoder;
};

class TransformerEncoderImpl : public torch::nn::Module {
 public:
  TransformerEncoderImpl(const TransformerConfig& cfg, torch::nn::Embedding embed_tokens);
  // With `maps`, appends each layer's self-attention distribution.
  EncoderOut forward(const torch::Tensor& src, AttentionMaps* maps = nullptr);
  torch::nn::Embedding embed_tokens{nullptr};
  nn::PositionalEmbedding embed_positions{nullptr};
  torch::nn::ModuleList layers;
  torch::nn::LayerNorm layer_norm{nullptr};  // pre-norm only
  torch::nn::LayerNorm layernorm_embedding{nullptr};  // model.layernorm_embedding only
  nn::DiSAEncoder disa{nullptr};             // encoder.type disan
  std::vector<nn::DoubleAttention> a2;       // per layer; null where none follows it

 private:
  double embed_scale_, dropout_;
};
TORCH_MODULE(TransformerEncoder);

class TransformerDecoderImpl : public torch::nn::Module, public nn::LowPrecision {
 public:
  TransformerDecoderImpl(const TransformerConfig& cfg, torch::nn::Embedding embed_tokens, int64_t vocab);
  // With `maps`, appends each layer's self- and encoder-attention distributions.
  DecoderOut forward(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn,
                     AttentionMaps* maps = nullptr);
  DecoderOut step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state, bool need_attn);
  // step() reads `enc` only through its layers' StaticAttentionCache, filled on the first step.
  static constexpr bool kStepsReadEncoderOutOnce = true;
  torch::nn::Embedding embed_tokens{nullptr};
  nn::PositionalEmbedding embed_positions{nullptr};
  torch::nn::ModuleList layers;
  torch::nn::LayerNorm layer_norm{nullptr};  // pre-norm only
  torch::nn::LayerNorm layernorm_embedding{nullptr};  // model.layernorm_embedding only
  torch::Tensor project_in;                 // decoder.project_in_dim.weight [C, input_dim], when input_dim differs
  torch::Tensor project_out;                // decoder.project_out_dim.weight [output_dim, C], when output_dim differs
  torch::Tensor output_weight;              // decoder.output_projection.weight [V, C]
  torch::Tensor output_bias;                // decoder.output_projection.bias [V], with decoder.output_bias
  nn::PackedWeight output_packed;           // output_weight in the compute type, when one is set
  void set_compute_type(kernels::ComputeType type) override { output_packed.pack(output_weight, output_bias, type); }
  std::vector<nn::DoubleAttention> a2;       // per layer (causal); null where none follows it

 private:
  // Whether layer i returns encoder attention when the pass needs it: the alignment layer and the
  // layers of its encoder-attention block before it (they share the block's owner's), the
  // alignment layer's last.
  bool returns_attn(size_t i) const { return i >= alignment_owner_ && i <= alignment_layer_; }
  double embed_scale_, dropout_;
  size_t alignment_layer_ = 0, alignment_owner_ = 0;  // the alignment layer, its block's first layer
};
TORCH_MODULE(TransformerDecoder);

class TransformerModel : public EncoderDecoderModel<TransformerConfig, TransformerEncoder, TransformerDecoder> {
 public:
  using EncoderDecoderModel::EncoderDecoderModel;
  // The distributions of every attention layer, teacher-forced on prev_tokens.
  AttentionMaps attention_maps(const torch::Tensor& src, const torch::Tensor& prev_tokens);
};

using TransformerLanguageModel = DecoderOnlyModel<TransformerLMConfig, TransformerDecoder>;

void register_transformer(Registry& reg);

}  // namespace leanseq::models

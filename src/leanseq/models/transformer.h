// The Transformer encoder-decoder (Vaswani et al. 2017), faithful to fairseq's TransformerModel:
// parameter names match fairseq's state_dict keys, so fairseq weights load directly.
#pragma once
#include <torch/torch.h>

#include "leanseq/models/encoder_decoder.h"
#include "leanseq/models/seq2seq.h"
#include "leanseq/nn/embeddings.h"
#include "leanseq/nn/transformer_layer.h"

namespace leanseq::models {

class Registry;

struct TransformerSideConfig {
  int64_t embed_dim = 512, ffn_embed_dim = 2048, layers = 6, attention_heads = 8;
  bool normalize_before = false, learned_pos = false;
};

struct TransformerConfig : ModelConfig {
  TransformerSideConfig encoder, decoder;
  double dropout = 0.1, attention_dropout = 0.0, activation_dropout = 0.0;
  std::string activation_fn = "relu";
  bool share_decoder_input_output_embed = false, share_all_embeddings = false, no_scale_embedding = false;
  int64_t max_source_positions = 1024, max_target_positions = 1024;

  void visit(ConfigVisitor& v) override;
  std::string family() const override { return "transformer"; }
  std::shared_ptr<ModelConfig> clone() const override { return std::make_shared<TransformerConfig>(*this); }
  std::string summary() const override;
  void validate() const override;
  nn::TransformerLayerOptions layer_options(const TransformerSideConfig& side) const;
};

class TransformerEncoderImpl : public torch::nn::Module {
 public:
  TransformerEncoderImpl(const TransformerConfig& cfg, torch::nn::Embedding embed_tokens);
  EncoderOut forward(const torch::Tensor& src);
  torch::nn::Embedding embed_tokens{nullptr};
  nn::PositionalEmbedding embed_positions{nullptr};
  torch::nn::ModuleList layers;
  torch::nn::LayerNorm layer_norm{nullptr};  // pre-norm only

 private:
  double embed_scale_, dropout_;
};
TORCH_MODULE(TransformerEncoder);

class TransformerDecoderImpl : public torch::nn::Module {
 public:
  TransformerDecoderImpl(const TransformerConfig& cfg, torch::nn::Embedding embed_tokens, int64_t vocab);
  DecoderOut forward(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn);
  DecoderOut step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state, bool need_attn);
  torch::nn::Embedding embed_tokens{nullptr};
  nn::PositionalEmbedding embed_positions{nullptr};
  torch::nn::ModuleList layers;
  torch::nn::LayerNorm layer_norm{nullptr};  // pre-norm only
  torch::Tensor output_weight;              // decoder.output_projection.weight [V, C]

 private:
  double embed_scale_, dropout_;
};
TORCH_MODULE(TransformerDecoder);

using TransformerModel = EncoderDecoderModel<TransformerConfig, TransformerEncoder, TransformerDecoder>;

void register_transformer(Registry& reg);

}  // namespace leanseq::models

// The LightConv / DynamicConv encoder-decoder of fairseq's lightconv.py (Wu et al. 2019): token
// embeddings scaled by sqrt(dim) plus sinusoidal positions, stacks of LightConv layers (nn/lightconv.h)
// whose kernel sizes are set per layer, a decoder that keeps encoder-decoder attention. Parameter
// names match fairseq's state_dict keys.
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/packed_weight.h"

#include "leanseq/models/encoder_decoder.h"
#include "leanseq/models/a2_blocks.h"
#include "leanseq/models/seq2seq.h"
#include "leanseq/nn/embeddings.h"
#include "leanseq/nn/lightconv.h"

namespace leanseq::models {

class Registry;

struct LightConvSideConfig {
  int64_t embed_dim = 512, conv_dim = 0, ffn_embed_dim = 2048, layers = 7, attention_heads = 8;
  bool normalize_before = false, learned_pos = false, glu = true;
  std::string conv_type = "dynamic";  // dynamic | lightweight (fairseq's default is dynamic)
  std::string kernel_size_list = "3,7,15,31,31,31,31";
  A2Blocks a2;  // A2 double-attention blocks after some layers (causal in the decoder)
  // conv_dim 0 means embed_dim; a single kernel size applies to every layer.
  int64_t resolved_conv_dim() const { return conv_dim > 0 ? conv_dim : embed_dim; }
  std::vector<int64_t> kernel_sizes(const std::string& key) const;
};

struct LightConvConfig : ModelConfig {
  LightConvConfig();
  LightConvSideConfig encoder, decoder;
  double dropout = 0.1, attention_dropout = 0.0, relu_dropout = 0.0, input_dropout = 0.1, weight_dropout = 0.0;
  bool weight_softmax = true;
  bool share_decoder_input_output_embed = false, share_all_embeddings = false;
  int64_t max_source_positions = 1024, max_target_positions = 1024;
  std::string conv_impl = "auto";  // auto | unfold | band | kernel
  bool decoder_only = false;       // set by LightConvLMConfig: no encoder attention, no final LayerNorm

  void visit(ConfigVisitor& v) override;
  std::string family() const override { return "lightconv"; }
  std::shared_ptr<ModelConfig> clone() const override { return std::make_shared<LightConvConfig>(*this); }
  std::string summary() const override;
  void validate() const override;
  nn::LightConvLayerOptions layer_options(const LightConvSideConfig& side, int64_t kernel_size) const;
};

// fairseq's lightconv_lm: the LightConv decoder without encoder attention, trained as a language
// model. Only the decoder.* keys and the shared options are configurable; pre-norm is forced (as
// fairseq does: "the model training is not stable without this") and there is no final LayerNorm.
struct LightConvLMConfig : LightConvConfig {
  LightConvLMConfig();
  void visit(ConfigVisitor& v) override;
  std::string family() const override { return "lightconv_lm"; }
  std::shared_ptr<ModelConfig> clone() const override { return std::make_shared<LightConvLMConfig>(*this); }
  std::string summary() const override;
  void validate() const override;
  bool language_model() const override { return true; }
  int64_t embedding_dim() const { return decoder.embed_dim; }
};

class LightConvEncoderImpl : public torch::nn::Module {
 public:
  LightConvEncoderImpl(const LightConvConfig& cfg, torch::nn::Embedding embed_tokens);
  EncoderOut forward(const torch::Tensor& src);
  torch::nn::Embedding embed_tokens{nullptr};
  nn::PositionalEmbedding embed_positions{nullptr};
  torch::nn::ModuleList layers;
  torch::nn::LayerNorm layer_norm{nullptr};  // pre-norm only
  std::vector<nn::DoubleAttention> a2;       // per layer; null where none follows it

 private:
  double embed_scale_, dropout_;
};
TORCH_MODULE(LightConvEncoder);

class LightConvDecoderImpl : public torch::nn::Module, public nn::LowPrecision {
 public:
  LightConvDecoderImpl(const LightConvConfig& cfg, torch::nn::Embedding embed_tokens, int64_t vocab);
  DecoderOut forward(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn);
  DecoderOut step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state, bool need_attn);
  // step() reads `enc` only through its layers' StaticAttentionCache, filled on the first step.
  static constexpr bool kStepsReadEncoderOutOnce = true;
  torch::nn::Embedding embed_tokens{nullptr};
  nn::PositionalEmbedding embed_positions{nullptr};
  torch::nn::ModuleList layers;
  torch::nn::LayerNorm layer_norm{nullptr};  // pre-norm only
  torch::Tensor output_weight;              // decoder.output_projection.weight [V, C]
  nn::PackedWeight output_packed;           // output_weight in the compute type, when one is set
  void set_compute_type(kernels::ComputeType type) override { output_packed.pack(output_weight, {}, type); }
  std::vector<nn::DoubleAttention> a2;       // per layer (causal); null where none follows it

 private:
  double embed_scale_, dropout_;
};
TORCH_MODULE(LightConvDecoder);

using LightConvModel = EncoderDecoderModel<LightConvConfig, LightConvEncoder, LightConvDecoder>;

using LightConvLanguageModel = DecoderOnlyModel<LightConvLMConfig, LightConvDecoder>;

void register_lightconv(Registry& reg);

}  // namespace leanseq::models

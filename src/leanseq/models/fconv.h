// ConvS2S, the fully convolutional encoder-decoder of fairseq's fconv.py (Gehring et al. 2017):
// token embeddings N(0, 0.1) plus learned positions (unscaled), stacks of weight-normalised
// convolution + GLU blocks with residuals scaled by sqrt(0.5), an encoder that returns keys z and
// values (z + e) sqrt(0.5) with its gradient scaled by 1 / (2 * attention layers), and a causal
// decoder with multi-step attention in every layer. Parameter names match fairseq's state_dict.
#pragma once
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "leanseq/models/a2_blocks.h"
#include "leanseq/models/seq2seq.h"
#include "leanseq/nn/embeddings.h"
#include "leanseq/nn/fconv.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/output_rows.h"

namespace leanseq::models {

class Registry;

// One convolution layer of a spec: output channels, kernel width, and which earlier output the
// residual connection comes from (1: the previous layer; 0: none).
struct FConvLayerSpec {
  int64_t channels = 0, kernel_size = 0, residual = 1;
  bool operator==(const FConvLayerSpec& o) const {
    return channels == o.channels && kernel_size == o.kernel_size && residual == o.residual;
  }
};

// Parses fairseq's notation, e.g. "[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2" (tuples of
// 2 or 3 integers, lists joined with + and repeated with * n). Throws ConfigError naming `key`
// and the character where the text stops making sense.
std::vector<FConvLayerSpec> parse_fconv_layers(const std::string& text, const std::string& key);
// "True", "False" or a list of them ("[True, False, True]"), one per layer.
std::vector<bool> parse_fconv_attention(const std::string& text, size_t layers, const std::string& key);

struct FConvConfig : ModelConfig {
  int64_t encoder_embed_dim = 512, decoder_embed_dim = 512, decoder_out_embed_dim = 256;
  std::string encoder_layers = "[(512, 3)] * 20", decoder_layers = "[(512, 3)] * 20";
  std::string decoder_attention = "True";
  double dropout = 0.1;
  bool share_input_output_embed = false;
  // A2 blocks after some encoder layers and, causal, after some decoder layers (keys
  // encoder.a2_layers, decoder.a2_layers, ...; their width is that layer's channels).
  A2Blocks encoder_a2, decoder_a2;
  int64_t max_source_positions = 1024, max_target_positions = 1024;

  void visit(ConfigVisitor& v) override;
  std::string family() const override { return "fconv"; }
  std::shared_ptr<ModelConfig> clone() const override { return std::make_shared<FConvConfig>(*this); }
  std::string summary() const override;
  void validate() const override;
};

class FConvEncoderImpl : public torch::nn::Module {
 public:
  FConvEncoderImpl(const FConvConfig& cfg, int64_t vocab);
  // out = z (attention keys), values = (z + embedding) sqrt(0.5).
  EncoderOut forward(const torch::Tensor& src);
  int64_t num_attention_layers = 1;  // set by the model: scales the encoder's gradient
  torch::nn::Embedding embed_tokens{nullptr};
  nn::PositionalEmbedding embed_positions{nullptr};
  nn::WeightNormLinear fc1{nullptr}, fc2{nullptr};
  // One handle per layer (registered as convolutions.<i> and projections.<i>); a projection is
  // empty where the residual keeps its width.
  std::vector<nn::ConvTBC> convolutions;
  std::vector<nn::WeightNormLinear> projections;
  std::vector<nn::DoubleAttention> a2;  // per layer; null where none follows it

 private:
  std::vector<FConvLayerSpec> specs_;
  double dropout_;
};
TORCH_MODULE(FConvEncoder);

class FConvDecoderImpl : public torch::nn::Module {
 public:
  FConvDecoderImpl(const FConvConfig& cfg, int64_t vocab);
  // attn: the encoder attention averaged over the attention layers (as fairseq returns it).
  DecoderOut forward(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn);
  DecoderOut step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state, bool need_attn);
  size_t num_layers() const { return specs_.size(); }
  bool has_a2() const {
    return std::any_of(a2.begin(), a2.end(), [](const nn::DoubleAttention& b) { return !b.is_empty(); });
  }
  int64_t num_attention_layers() const;
  torch::nn::Embedding embed_tokens{nullptr};
  nn::PositionalEmbedding embed_positions{nullptr};
  nn::WeightNormLinear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};  // fc3: the output layer, untied
  nn::TiedLinear tied_fc3{nullptr};                               // or tied to embed_tokens ("fc3")
  // One handle per layer (registered as convolutions.<i>, projections.<i>, attention.<i>);
  // projections and attentions are empty where a layer has none.
  std::vector<nn::ConvTBC> convolutions;
  std::vector<nn::WeightNormLinear> projections;
  std::vector<nn::FConvAttention> attention;
  std::vector<nn::DoubleAttention> a2;  // per layer; null where none follows it (causal)

 private:
  // The stack over batch-major embeddings x [B, T, E]; `conv` runs layer i's convolution on
  // batch-major input and returns batch-major output, `global` the A2 block after layer i.
  using LayerFn = std::function<torch::Tensor(size_t, const torch::Tensor&)>;
  // `rows`: a shortlist's output rows (null: the whole vocabulary).
  DecoderOut run(const torch::Tensor& embedded, const EncoderOut& enc, bool need_attn, const LayerFn& conv,
                 const LayerFn& global, nn::OutputRows* rows = nullptr);
  std::vector<FConvLayerSpec> specs_;
  double dropout_;
};
TORCH_MODULE(FConvDecoder);

class FConvModel : public Seq2SeqModel {
 public:
  FConvModel(const FConvConfig& cfg, int64_t src_vocab, int64_t tgt_vocab);
  EncoderOut encode(const torch::Tensor& src, const torch::Tensor& src_lengths) override { return encoder(src); }
  DecoderOut decode(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn) override {
    return decoder->forward(prev_tokens, enc, need_attn);
  }
  // A convolution window per decoder layer, then the running sums of the A2 block after each.
  nn::IncrementalState init_state(const EncoderOut&) override { return {}; }
  DecoderOut step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state,
                  bool need_attn) override {
    return decoder->step(tokens, enc, state, need_attn);
  }
  // The position table has max_target_positions rows, the first pad + 1 of them unused.
  int64_t max_target_positions() const override { return cfg_.max_target_positions - nn::kPadIndex - 1; }

  FConvEncoder encoder{nullptr};
  FConvDecoder decoder{nullptr};

 private:
  FConvConfig cfg_;
};

void register_fconv(Registry& reg);

}  // namespace leanseq::models

// Pervasive Attention (Elbayad, Besacier, Verbeek, CoNLL 2018; attn2d): no encoder and no
// attention. The decoder builds a 2D grid whose cell (i, j) is [target embedding i ; source
// embedding j], runs masked 2D convolutions over it (target row i sees rows <= i and every source
// column), and pools each row over the source axis into the features that predict token i + 1.
// Two generations of the network: the 2018 DenseNet and the 2020 ResNet of depthwise masked
// convolutions (attn2d examples/pervasive). Tensors on the grid are channels last [B, T, S, C].
#pragma once
#include <torch/torch.h>

#include "leanseq/models/a2_blocks.h"
#include "leanseq/models/seq2seq.h"
#include "leanseq/nn/embeddings.h"
#include "leanseq/nn/linear.h"
#include "leanseq/nn/masked_conv2d.h"
#include "leanseq/nn/output_rows.h"

namespace leanseq::models {

class Registry;

struct PervasiveConfig : ModelConfig {
  int64_t encoder_embed_dim = 256, decoder_embed_dim = 256;
  bool add_positional_embeddings = false, learned_pos = false;
  double embeddings_dropout = 0.2, convolution_dropout = 0.2, prediction_dropout = 0.2;
  std::string convnet = "resnet";  // resnet (2020) | densenet (2018)
  int64_t num_layers = 14, kernel_size = 11;
  int64_t divide_channels = 2;  // the grid's channels are (encoder + decoder dims) / divide_channels
  // resnet: 1x1 conv to `bottleneck` channels, masked conv back (grouped; conv_groups 0 means
  // bottleneck groups, a depthwise convolution), then an FFN; the output is the mean of the input
  // and every layer's output.
  int64_t bottleneck = 0, conv_groups = 0, ffn_dim = 1024;  // bottleneck 0: the grid's channels
  bool conv_bias = false;
  // densenet: one dense block of num_layers layers [norm, relu, 1x1 conv to bn_size * growth_rate,
  // norm, relu, masked conv to growth_rate], a transition [norm, relu, 1x1 conv] halving the
  // channels, then a final norm and relu. norm: batch or none.
  int64_t growth_rate = 32, bn_size = 4;
  std::string norm = "batch";
  // Pooling over the source axis: max, avg, attn, max-attn or gated-max.
  std::string aggregator = "gated-max";
  int64_t output_dim = 0;  // the projection after pooling (0: decoder_embed_dim)
  bool share_decoder_input_output_embed = false, share_all_embeddings = false;
  // A2 blocks in their 2D form after some layers (resnet: on the layer's output; densenet: on the
  // features so far); a cell gathers from the rows <= its own (keys a2_layers, a2_features, a2_descriptors).
  A2Blocks a2;
  // Recompute each layer's activations in the backward pass instead of keeping them.
  bool memory_efficient = false;
  int64_t max_source_positions = 1024, max_target_positions = 1024;

  void visit(ConfigVisitor& v) override;
  std::string family() const override { return "pervasive"; }
  std::shared_ptr<ModelConfig> clone() const override { return std::make_shared<PervasiveConfig>(*this); }
  std::string summary() const override;
  void validate() const override;
  int64_t grid_channels() const { return (encoder_embed_dim + decoder_embed_dim) / divide_channels; }
  int64_t resolved_output_dim() const { return output_dim > 0 ? output_dim : decoder_embed_dim; }
};

// Pad cells of the grid: source pads [B, 1, S, 1], target pads [B, T, 1, 1] (either may be undefined).
struct GridMasks {
  torch::Tensor source, target;
  torch::Tensor zero_source(const torch::Tensor& x) const {
    return source.defined() ? x.masked_fill(source, 0) : x;
  }
  torch::Tensor zero_pads(const torch::Tensor& x) const {
    auto y = zero_source(x);
    return target.defined() ? y.masked_fill(target, 0) : y;
  }
  // The pad cells, broadcastable to [B, T, S] (undefined when there are none).
  torch::Tensor cells() const {
    if (source.defined() && target.defined()) return source.squeeze(-1).logical_or(target.squeeze(-1));
    if (source.defined()) return source.squeeze(-1);
    return target.defined() ? target.squeeze(-1) : torch::Tensor();
  }
};

// The convolutional network over the grid: [B, T, S, C_in] -> [B, T, S, output_channels()].
class GridNet : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x, const GridMasks& masks) = 0;
  // The next rows of the grid; each layer keeps its rows in `state` under its own name.
  virtual torch::Tensor step(const torch::Tensor& rows, const GridMasks& masks, nn::IncrementalState& state) = 0;
  virtual int64_t output_channels() const = 0;
};

// Pooling over the source axis: [B, T, S, C] -> features [B, T, C'] and, when asked, a
// distribution over source positions [B, T, S] (attention weights, or for the max aggregators
// the share of channels whose maximum each source position holds: attn2d's implicit alignment).
class AggregatorImpl : public torch::nn::Module {
 public:
  AggregatorImpl(const std::string& kind, int64_t channels);
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x, const torch::Tensor& source_pad,
                                                  bool need_attn);
  int64_t output_channels() const { return kind_ == Kind::max_attn ? 2 * channels_ : channels_; }
  nn::Linear linear{nullptr}, w1{nullptr}, w2{nullptr};

 private:
  enum class Kind { max, avg, attn, max_attn, gated_max };  // the config's name, parsed once
  Kind kind_;
  int64_t channels_;
};
TORCH_MODULE(Aggregator);

class PervasiveModel : public Seq2SeqModel, public nn::LowPrecision {
 public:
  PervasiveModel(const PervasiveConfig& cfg, int64_t src_vocab, int64_t tgt_vocab);
  EncoderOut encode(const torch::Tensor& src, const torch::Tensor& src_lengths) override;
  DecoderOut decode(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn) override;
  nn::IncrementalState init_state(const EncoderOut& enc) override;
  DecoderOut step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state,
                  bool need_attn) override;
  int64_t max_target_positions() const override { return cfg_.max_target_positions; }

  torch::nn::Embedding src_embed{nullptr}, tgt_embed{nullptr};
  nn::PositionalEmbedding src_positions{nullptr}, tgt_positions{nullptr};
  nn::Linear reduce_channels{nullptr}, projection{nullptr};
  std::shared_ptr<GridNet> net;
  Aggregator aggregator{nullptr};
  torch::Tensor output_weight;
  nn::PackedWeight output_packed;  // output_weight in the compute type, when one is set
  // The output projection; the Linear layers (channel_linear's at inference too) pack their own.
  void set_compute_type(kernels::ComputeType type) override { output_packed.pack(output_weight, {}, type); }

 private:
  // The grid [B, T, S, C] of target embeddings x (one row each) against the source.
  torch::Tensor grid(const torch::Tensor& tgt_emb, const EncoderOut& enc);
  DecoderOut predict(const torch::Tensor& features, const GridMasks& masks, bool need_attn,
                     nn::OutputRows* rows = nullptr);
  PervasiveConfig cfg_;
};

// A Linear over the channels of a channels-last grid [B, T, S, C]. Training: a 1x1 convolution of
// its weight (oneDNN runs it faster than the equivalent matmul). Inference on the CPU: the Linear's
// own product in its compute type, whose rows do not depend on the others, so a cell's value is the
// same bits whatever the grid's width (a sentence alone or padded in a batch).
torch::Tensor channel_linear(const nn::Linear& l, const torch::Tensor& x);

void register_pervasive(Registry& reg);

}  // namespace leanseq::models

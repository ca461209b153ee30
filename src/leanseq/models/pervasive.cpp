#include "leanseq/models/pervasive.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/models/registry.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"
#include "leanseq/nn/recompute.h"

namespace leanseq::models {

// ---------------------------------------------------------------- config

void PervasiveConfig::visit(ConfigVisitor& v) {
  v.field("encoder_embed_dim", encoder_embed_dim, "source embedding dimension");
  v.field("decoder_embed_dim", decoder_embed_dim, "target embedding dimension");
  v.field("add_positional_embeddings", add_positional_embeddings, "add positions to both embeddings");
  v.field("learned_pos", learned_pos, "learned instead of sinusoidal positions");
  v.field("embeddings_dropout", embeddings_dropout, "dropout on the embeddings", kProbability);
  v.field("convolution_dropout", convolution_dropout, "dropout in every layer of the network", kProbability);
  v.field("prediction_dropout", prediction_dropout, "dropout before the output layer", kProbability);
  v.field("convnet", convnet, "resnet (2020, depthwise masked convolutions) or densenet (2018)");
  v.field("num_layers", num_layers, "layers of the network");
  v.field("kernel_size", kernel_size, "masked convolution kernel (odd)");
  v.field("divide_channels", divide_channels, "the grid has (encoder + decoder dims) / this channels");
  v.field("bottleneck", bottleneck, "resnet: channels of the masked convolution's input (0: the grid's)");
  v.field("conv_groups", conv_groups, "resnet: groups of the masked convolution (0: bottleneck, depthwise)");
  v.field("ffn_dim", ffn_dim, "resnet: FFN inner dimension");
  v.field("conv_bias", conv_bias, "bias in the masked convolutions (and the densenet's 1x1 convolutions)");
  v.field("growth_rate", growth_rate, "densenet: channels each layer adds");
  v.field("bn_size", bn_size, "densenet: the 1x1 bottleneck has bn_size * growth_rate channels");
  v.field("norm", norm, "densenet: batch or none");
  v.field("aggregator", aggregator, "pooling over the source: max, avg, attn, max-attn or gated-max");
  v.field("output_dim", output_dim, "projection after pooling (0: decoder_embed_dim)");
  v.field("share_decoder_input_output_embed", share_decoder_input_output_embed, "tie target and output embeddings");
  v.field("share_all_embeddings", share_all_embeddings, "one embedding for source, target and output");
  a2.visit(v, "");
  v.field("memory_efficient", memory_efficient, "recompute activations in the backward pass (less memory)");
  v.field("max_source_positions", max_source_positions, "longest source in tokens", Range::at_least(1));
  v.field("max_target_positions", max_target_positions, "longest target in tokens", Range::at_least(1));
}

std::string PervasiveConfig::summary() const {
  std::ostringstream os;
  os << convnet << ", layers " << num_layers << ", kernel " << kernel_size << ", embed " << encoder_embed_dim << "+"
     << decoder_embed_dim << ", grid channels " << grid_channels();
  if (convnet == "densenet") {
    os << ", growth " << growth_rate << ", norm " << norm;
  } else {
    os << ", ffn " << ffn_dim;
  }
  os << ", " << aggregator << " pooling" << a2.describe("") << (memory_efficient ? ", memory-efficient" : "");
  return os.str();
}

void PervasiveConfig::validate() const {
  auto positive = [](int64_t v, const char* key) {
    if (v <= 0) throw ConfigError(std::string("model.") + key + ": must be positive, got " + std::to_string(v));
  };
  positive(encoder_embed_dim, "encoder_embed_dim");
  positive(decoder_embed_dim, "decoder_embed_dim");
  positive(num_layers, "num_layers");
  positive(divide_channels, "divide_channels");
  a2.validate(num_layers, "", "the grid's layers");
  if (kernel_size < 1 || kernel_size % 2 == 0) {
    throw ConfigError("model.kernel_size: must be odd (the mask keeps the centre row), got " +
                      std::to_string(kernel_size));
  }
  if ((encoder_embed_dim + decoder_embed_dim) % divide_channels != 0) {
    throw ConfigError("model.divide_channels: " + std::to_string(divide_channels) + " does not divide " +
                      std::to_string(encoder_embed_dim + decoder_embed_dim) + " input channels");
  }
  if (convnet == "resnet") {
    positive(ffn_dim, "ffn_dim");
    const int64_t mid = bottleneck > 0 ? bottleneck : grid_channels();
    const int64_t groups = conv_groups > 0 ? conv_groups : mid;
    if (mid % groups != 0 || grid_channels() % groups != 0) {
      throw ConfigError("model.conv_groups: " + std::to_string(groups) + " groups do not divide " +
                        std::to_string(mid) + " -> " + std::to_string(grid_channels()) + " channels");
    }
  } else if (convnet == "densenet") {
    positive(growth_rate, "growth_rate");
    positive(bn_size, "bn_size");
    if (norm != "batch" && norm != "none") throw ConfigError("model.norm: expected batch or none, got '" + norm + "'");
  } else {
    throw ConfigError("model.convnet: expected resnet or densenet, got '" + convnet + "'");
  }
  if (aggregator != "max" && aggregator != "avg" && aggregator != "attn" && aggregator != "max-attn" &&
      aggregator != "gated-max") {
    throw ConfigError("model.aggregator: expected max, avg, attn, max-attn or gated-max, got '" + aggregator + "'");
  }
  if ((share_decoder_input_output_embed || share_all_embeddings) && resolved_output_dim() != decoder_embed_dim) {
    throw ConfigError("model.output_dim: tied output embeddings need output_dim = decoder_embed_dim");
  }
  if (share_all_embeddings && encoder_embed_dim != decoder_embed_dim) {
    throw ConfigError("model.share_all_embeddings: needs encoder_embed_dim = decoder_embed_dim");
  }
}

torch::Tensor channel_linear(const nn::Linear& l, const torch::Tensor& x) {
  // Inference: through a copy of the holder, as forward is not const.
  if (!torch::GradMode::is_enabled() && x.device().is_cpu()) return nn::Linear(l)->forward(x);
  const auto& w = l->weight;
  auto y = torch::conv2d(x.permute({0, 3, 1, 2}), w.view({w.size(0), w.size(1), 1, 1}), l->bias);
  return y.permute({0, 2, 3, 1});
}

namespace {

// Runs layer(x...) as it is or, in memory-efficient training, keeping only its inputs.
torch::Tensor run_layer(bool memory_efficient, torch::nn::Module& layer, const nn::BlockFn& fn,
                        const std::vector<torch::Tensor>& inputs) {
  return memory_efficient && layer.is_training() ? nn::recompute(layer, fn, inputs) : fn(inputs);
}

// ---------------------------------------------------------------- ResNet (2020)

class ResLayerImpl : public torch::nn::Module {
 public:
  ResLayerImpl(const PervasiveConfig& c) : dropout_(c.convolution_dropout) {
    const int64_t C = c.grid_channels(), mid = c.bottleneck > 0 ? c.bottleneck : C;
    conv1 = register_module("conv1", nn::make_linear(C, mid));
    mconv2 = register_module(
        "mconv2", nn::MaskedConv2d(mid, C, c.kernel_size, c.conv_groups > 0 ? c.conv_groups : mid, c.conv_bias));
    fc1 = register_module("fc1", nn::make_linear(C, c.ffn_dim));
    fc2 = register_module("fc2", nn::make_linear(c.ffn_dim, C));
  }
  torch::Tensor forward(const torch::Tensor& x, const GridMasks& m) {
    return finish(x, mconv2(m.zero_source(channel_linear(conv1, x))), m);
  }
  torch::Tensor step(const torch::Tensor& x, const GridMasks& m, nn::GridRowsCache& cache) {
    return finish(x, mconv2->step(m.zero_source(channel_linear(conv1, x)), cache), m);
  }
  nn::Linear conv1{nullptr}, fc1{nullptr}, fc2{nullptr};
  nn::MaskedConv2d mconv2{nullptr};

 private:
  // Pads zeroed, dropout, scaled residual; then the FFN with its own scaled residual.
  torch::Tensor finish(const torch::Tensor& x, const torch::Tensor& conv, const GridMasks& m) {
    const double scale = std::sqrt(0.5);
    auto y = scale * (nn::maybe_dropout(m.zero_pads(conv), dropout_, is_training()) + x);
    auto f = channel_linear(fc2, torch::relu(channel_linear(fc1, y)));
    return scale * (nn::maybe_dropout(f, dropout_, is_training()) + y);
  }
  double dropout_;
};
TORCH_MODULE(ResLayer);

class ResNet : public GridNet {
 public:
  explicit ResNet(const PervasiveConfig& c) : channels_(c.grid_channels()), memory_efficient_(c.memory_efficient) {
    residual_blocks = register_module("residual_blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_layers; ++i) residual_blocks->push_back(ResLayer(c));
    a2 = c.a2.make(*this, c.num_layers, channels_, true, c.convolution_dropout, nn::BlockNorm::none);  // a2_norm is none
  }
  // The mean of the input and of every layer's output (attn2d's "add-up"); an A2 block after a
  // layer is part of that layer's output.
  torch::Tensor forward(const torch::Tensor& x0, const GridMasks& m) override {
    const double scale = 1.0 / static_cast<double>(residual_blocks->size() + 1);
    auto x = x0, sum = x0 * scale;
    for (size_t i = 0; i < residual_blocks->size(); ++i) {
      const auto& module = residual_blocks[i];
      auto layer = module->as<ResLayer>();
      // By value: the backward pass of a memory-efficient layer calls it again.
      x = run_layer(memory_efficient_, *module,
                    [layer, m](const std::vector<torch::Tensor>& in) { return layer->forward(in[0], m); }, {x});
      if (a2[i]) x = a2[i]->forward_grid(x, m.cells(), true);
      sum = sum + x * scale;
    }
    return sum;
  }
  torch::Tensor step(const torch::Tensor& x0, const GridMasks& m, nn::IncrementalState& state) override {
    const double scale = 1.0 / static_cast<double>(residual_blocks->size() + 1);
    auto x = x0, sum = x0 * scale;
    for (size_t i = 0; i < residual_blocks->size(); ++i) {
      x = residual_blocks[i]->as<ResLayer>()->step(x, m, state.get<nn::GridRowsCache>(nn::state_name("residual_blocks", i)));
      if (a2[i]) x = a2[i]->step_grid(x, m.cells(), state.get<nn::DoubleAttentionCache>(a2_state_name(i)));
      sum = sum + x * scale;
    }
    return sum;
  }
  int64_t output_channels() const override { return channels_; }
  torch::nn::ModuleList residual_blocks;
  std::vector<nn::DoubleAttention> a2;  // per layer; null where none follows it

 private:
  int64_t channels_;
  bool memory_efficient_;
};

// ---------------------------------------------------------------- DenseNet (2018)

// BatchNorm over the channels of a channels-last grid, or nothing.
torch::Tensor maybe_norm(torch::nn::BatchNorm2d& bn, const torch::Tensor& x) {
  return bn ? bn(x.permute({0, 3, 1, 2})).permute({0, 2, 3, 1}) : x;
}

torch::nn::BatchNorm2d make_norm(torch::nn::Module& owner, const std::string& name, bool on, int64_t channels) {
  if (!on) return torch::nn::BatchNorm2d(nullptr);
  return owner.register_module(name, torch::nn::BatchNorm2d(channels));
}

class DenseLayerImpl : public torch::nn::Module {
 public:
  DenseLayerImpl(const PervasiveConfig& c, int64_t in) : dropout_(c.convolution_dropout) {
    const int64_t mid = c.bn_size * c.growth_rate;
    const bool bn = c.norm == "batch";
    norm1 = make_norm(*this, "norm1", bn, in);
    conv1 = register_module("conv1", nn::make_linear(in, mid, c.conv_bias));
    norm2 = make_norm(*this, "norm2", bn, mid);
    mconv2 = register_module("mconv2", nn::MaskedConv2d(mid, c.growth_rate, c.kernel_size, 1, c.conv_bias));
  }
  // The new features of the grid whose features so far are `features`.
  torch::Tensor forward(const std::vector<torch::Tensor>& features, const GridMasks& m) {
    return finish(mconv2(m.zero_source(bottleneck(features))), m);
  }
  torch::Tensor step(const std::vector<torch::Tensor>& features, const GridMasks& m, nn::GridRowsCache& cache) {
    return finish(mconv2->step(m.zero_source(bottleneck(features)), cache), m);
  }
  torch::nn::BatchNorm2d norm1{nullptr}, norm2{nullptr};
  nn::Linear conv1{nullptr};
  nn::MaskedConv2d mconv2{nullptr};

 private:
  torch::Tensor bottleneck(const std::vector<torch::Tensor>& features) {
    auto x = features.size() == 1 ? features[0] : torch::cat(features, -1);
    x = channel_linear(conv1, torch::relu(maybe_norm(norm1, x)));
    return torch::relu(maybe_norm(norm2, x));
  }
  torch::Tensor finish(const torch::Tensor& y, const GridMasks& m) {
    return nn::maybe_dropout(m.zero_pads(y), dropout_, is_training());
  }
  double dropout_;
};
TORCH_MODULE(DenseLayer);

class DenseNet : public GridNet {
 public:
  explicit DenseNet(const PervasiveConfig& c) : memory_efficient_(c.memory_efficient) {
    int64_t channels = c.grid_channels();
    std::vector<int64_t> widths;  // of the features after each layer
    dense_layers = register_module("dense_layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_layers; ++i, channels += c.growth_rate) {
      dense_layers->push_back(DenseLayer(c, channels));
      widths.push_back(channels + c.growth_rate);
    }
    a2 = c.a2.make(*this, widths, true, c.convolution_dropout, nn::BlockNorm::none);  // a2_norm is none
    const bool bn = c.norm == "batch";
    transition_norm = make_norm(*this, "transition_norm", bn, channels);
    transition = register_module("transition", nn::make_linear(channels, channels / 2, c.conv_bias));
    channels_ = channels / 2;
    norm_last = make_norm(*this, "norm_last", bn, channels_);
  }
  // An A2 block after a layer takes the features so far (the input and every output up to that
  // layer, concatenated) and hands its result on as the features that later layers extend.
  torch::Tensor forward(const torch::Tensor& x, const GridMasks& m) override {
    std::vector<torch::Tensor> features{x};
    for (size_t i = 0; i < dense_layers->size(); ++i) {
      const auto& module = dense_layers[i];
      auto layer = module->as<DenseLayer>();
      features.push_back(run_layer(memory_efficient_, *module,
                                   [layer, m](const std::vector<torch::Tensor>& in) { return layer->forward(in, m); },
                                   features));
      if (a2[i]) features = {a2[i]->forward_grid(torch::cat(features, -1), m.cells(), true)};
    }
    return finish(features);
  }
  torch::Tensor step(const torch::Tensor& x, const GridMasks& m, nn::IncrementalState& state) override {
    std::vector<torch::Tensor> features{x};
    for (size_t i = 0; i < dense_layers->size(); ++i) {
      features.push_back(dense_layers[i]->as<DenseLayer>()->step(features, m, state.get<nn::GridRowsCache>(nn::state_name("dense_layers", i))));
      if (a2[i]) {
        features = {a2[i]->step_grid(torch::cat(features, -1), m.cells(),
                                     state.get<nn::DoubleAttentionCache>(a2_state_name(i)))};
      }
    }
    return finish(features);
  }
  int64_t output_channels() const override { return channels_; }
  torch::nn::ModuleList dense_layers;
  std::vector<nn::DoubleAttention> a2;  // per layer; null where none follows it
  torch::nn::BatchNorm2d transition_norm{nullptr}, norm_last{nullptr};
  nn::Linear transition{nullptr};

 private:
  torch::Tensor finish(const std::vector<torch::Tensor>& features) {
    auto x = channel_linear(transition, torch::relu(maybe_norm(transition_norm, torch::cat(features, -1))));
    return torch::relu(maybe_norm(norm_last, x));
  }
  int64_t channels_ = 0;
  bool memory_efficient_;
};

}  // namespace

// ---------------------------------------------------------------- aggregation

AggregatorImpl::AggregatorImpl(const std::string& kind, int64_t channels) : channels_(channels) {
  if (kind == "max") {
    kind_ = Kind::max;
  } else if (kind == "avg") {
    kind_ = Kind::avg;
  } else if (kind == "attn") {
    kind_ = Kind::attn;
  } else if (kind == "max-attn") {
    kind_ = Kind::max_attn;
  } else if (kind == "gated-max") {
    kind_ = Kind::gated_max;
  } else {
    throw ConfigError("model.aggregator: unknown aggregator '" + kind + "'");
  }
  if (kind_ == Kind::gated_max) linear = register_module("linear", nn::make_linear(channels, 2 * channels));
  if (kind_ == Kind::attn || kind_ == Kind::max_attn) {
    w1 = register_module("w1", nn::make_linear(channels, channels));
    w2 = register_module("w2", nn::make_linear(channels, 1));
  }
}

std::pair<torch::Tensor, torch::Tensor> AggregatorImpl::forward(const torch::Tensor& x_in, const torch::Tensor& source_pad,
                                                                bool need_attn) {
  // source_pad: [B, 1, S, 1] bool or undefined.
  const int64_t S = x_in.size(2);
  auto x = kind_ == Kind::gated_max ? torch::glu(channel_linear(linear, x_in), -1) : x_in;
  auto max_pool = [&](const torch::Tensor& v) {
    auto masked = source_pad.defined() ? v.masked_fill(source_pad, -std::numeric_limits<float>::infinity()) : v;
    auto [values, index] = masked.max(2);  // [B, T, C]
    torch::Tensor attn;
    if (need_attn) {
      auto counts = torch::zeros({v.size(0), v.size(1), S}, v.options());
      attn = counts.scatter_add_(2, index, torch::ones_like(values)) / static_cast<double>(v.size(3));
    }
    return std::make_pair(values, attn);
  };
  auto attention_pool = [&](const torch::Tensor& v) {
    auto scores = w2(w1(v));  // [B, T, S, 1]
    if (source_pad.defined()) scores = scores.masked_fill(source_pad, -std::numeric_limits<float>::infinity());
    auto alpha = torch::softmax(scores, 2);
    return std::make_pair((alpha * v).sum(2), alpha.squeeze(-1));
  };
  if (kind_ == Kind::max || kind_ == Kind::gated_max) return max_pool(x);
  if (kind_ == Kind::attn) return attention_pool(x);
  if (kind_ == Kind::max_attn) {
    auto [m, counts] = max_pool(x);
    auto [a, alpha] = attention_pool(x);
    return {torch::cat({m, a}, -1), alpha};
  }
  // avg: the mean over the source tokens times sqrt(source length) (attn2d 2018's scaling).
  auto sum = source_pad.defined() ? x.masked_fill(source_pad, 0).sum(2) : x.sum(2);
  auto lengths = source_pad.defined() ? source_pad.logical_not().sum(2).to(x.scalar_type())  // [B, 1, 1]
                                      : torch::full({x.size(0), 1, 1}, static_cast<double>(S), x.options());
  torch::Tensor attn;
  if (need_attn) {
    attn = torch::ones({x.size(0), x.size(1), S}, x.options()) / lengths;
    if (source_pad.defined()) attn = attn.masked_fill(source_pad.squeeze(-1), 0);
  }
  return {sum / lengths.sqrt(), attn};
}

// ---------------------------------------------------------------- model

PervasiveModel::PervasiveModel(const PervasiveConfig& cfg, int64_t src_vocab, int64_t tgt_vocab) : cfg_(cfg) {
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  auto decoder = register_module("decoder", std::make_shared<torch::nn::Module>());
  src_embed = encoder->register_module("embed_tokens", nn::make_embedding(src_vocab, cfg.encoder_embed_dim, nn::kPadIndex));
  tgt_embed = decoder->register_module(
      "embed_tokens",
      cfg.share_all_embeddings ? src_embed : nn::make_embedding(tgt_vocab, cfg.decoder_embed_dim, nn::kPadIndex));
  if (cfg.add_positional_embeddings) {
    src_positions = encoder->register_module(
        "embed_positions",
        nn::PositionalEmbedding(cfg.encoder_embed_dim, nn::kPadIndex, cfg.max_source_positions, cfg.learned_pos));
    tgt_positions = decoder->register_module(
        "embed_positions",
        nn::PositionalEmbedding(cfg.decoder_embed_dim, nn::kPadIndex, cfg.max_target_positions, cfg.learned_pos));
  }
  const int64_t in = cfg.encoder_embed_dim + cfg.decoder_embed_dim;
  if (cfg.divide_channels > 1) reduce_channels = decoder->register_module("reduce_channels", nn::make_linear(in, cfg.grid_channels()));
  if (cfg.convnet == "densenet") {
    net = decoder->register_module("net", std::make_shared<DenseNet>(cfg));
  } else {
    net = decoder->register_module("net", std::make_shared<ResNet>(cfg));
  }
  aggregator = decoder->register_module("aggregator", Aggregator(cfg.aggregator, net->output_channels()));
  projection = decoder->register_module("projection", nn::make_linear(aggregator->output_channels(), cfg.resolved_output_dim()));
  output_weight = nn::register_output_projection(*decoder, tgt_embed,
                                                 cfg.share_decoder_input_output_embed || cfg.share_all_embeddings,
                                                 tgt_vocab, cfg.resolved_output_dim());
}

EncoderOut PervasiveModel::encode(const torch::Tensor& src, const torch::Tensor&) {
  auto x = src_embed(src) * std::sqrt(static_cast<double>(cfg_.encoder_embed_dim));
  if (src_positions) x = x + src_positions(src);
  return {nn::maybe_dropout(x, cfg_.embeddings_dropout, is_training()), src.eq(nn::kPadIndex), {}};
}

torch::Tensor PervasiveModel::grid(const torch::Tensor& tgt_emb, const EncoderOut& enc) {
  const int64_t B = tgt_emb.size(0), T = tgt_emb.size(1), S = enc.out.size(1);
  auto x = torch::cat({enc.out.unsqueeze(1).expand({B, T, S, enc.out.size(2)}),
                       tgt_emb.unsqueeze(2).expand({B, T, S, tgt_emb.size(2)})},
                      -1);
  return reduce_channels ? channel_linear(reduce_channels, x) : x;
}

DecoderOut PervasiveModel::predict(const torch::Tensor& features, const GridMasks& masks, bool need_attn,
                                   nn::OutputRows* rows) {
  auto [pooled, attn] = aggregator(features, masks.source, need_attn);
  auto x = nn::maybe_dropout(projection(pooled), cfg_.prediction_dropout, is_training());
  return {nn::output_logits(x, output_weight, {}, output_packed, rows), need_attn ? attn : torch::Tensor()};
}

namespace {
GridMasks masks_for(const torch::Tensor& source_pad, const torch::Tensor& target_tokens) {
  GridMasks m;
  if (source_pad.any().item<bool>()) m.source = source_pad.unsqueeze(1).unsqueeze(-1);
  auto tp = target_tokens.eq(nn::kPadIndex);
  if (tp.any().item<bool>()) m.target = tp.unsqueeze(2).unsqueeze(-1);
  return m;
}
}  // namespace

DecoderOut PervasiveModel::decode(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn) {
  auto y = tgt_embed(prev_tokens) * std::sqrt(static_cast<double>(cfg_.decoder_embed_dim));
  if (tgt_positions) y = y + tgt_positions(prev_tokens);
  y = nn::maybe_dropout(y, cfg_.embeddings_dropout, is_training());
  auto masks = masks_for(enc.padding_mask, prev_tokens);
  auto x = masks.zero_pads(grid(y, enc));
  return predict(net->forward(x, masks), masks, need_attn);
}

nn::IncrementalState PervasiveModel::init_state(const EncoderOut&) { return {}; }

DecoderOut PervasiveModel::step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state,
                                bool need_attn) {
  const int64_t B = tokens.size(0), n = tokens.size(1);
  auto y = tgt_embed(tokens) * std::sqrt(static_cast<double>(cfg_.decoder_embed_dim));
  if (tgt_positions) y = y + tgt_positions->at_steps(state.steps, n, B, tokens.device());
  y = nn::maybe_dropout(y, cfg_.embeddings_dropout, is_training());
  auto masks = masks_for(enc.padding_mask, tokens);
  auto x = masks.zero_pads(grid(y, enc));
  auto out = predict(net->step(x, masks, state), masks, need_attn, state.output_rows.get());
  state.steps += n;
  return out;
}

// ---------------------------------------------------------------- presets

namespace {
// attn2d's examples/pervasive recipe for IWSLT'14 De-En: 256 + 256 embeddings halved to 256 grid
// channels, 14 residual layers of 11 x 11 depthwise masked convolutions (with bias), gated max
// pooling, positions, tied target embeddings.
void iwslt_2020(PervasiveConfig& c) {
  c.conv_bias = true;
  c.aggregator = "gated-max";
  c.add_positional_embeddings = true;
  c.share_decoder_input_output_embed = true;
}
}  // namespace

void register_pervasive(Registry& reg) {
  reg.add_family(encoder_decoder_family<PervasiveConfig, PervasiveModel>("pervasive"));
  auto add = preset_adder<PervasiveConfig>(reg, "pervasive");
  add("pervasive", "attn2d's base Pervasive Attention (2020 ResNet: 14 layers, 11x11 depthwise masked convs)",
      [](PervasiveConfig&) {});
  add("pervasive_iwslt_de_en", "attn2d's IWSLT'14 De-En recipe (2020 ResNet, gated max, positions, tied output)",
      iwslt_2020);
  add("pervasive_iwslt_de_en_2018",
      "the CoNLL 2018 model: DenseNet of 24 layers, growth 32, kernel 5, BatchNorm, 128-dim embeddings, max pooling",
      [](PervasiveConfig& c) {
        c.encoder_embed_dim = c.decoder_embed_dim = 128;
        c.convnet = "densenet";
        c.num_layers = 24, c.growth_rate = 32, c.bn_size = 4, c.kernel_size = 5;
        c.norm = "batch";
        c.conv_bias = false;
        c.aggregator = "max";
        c.share_decoder_input_output_embed = true;
      });
  add("pervasive_small", "small 2020-style Pervasive Attention for CPU work (128-dim embeddings, 64-channel grid, 8 layers)",
      [](PervasiveConfig& c) {
        iwslt_2020(c);
        c.encoder_embed_dim = c.decoder_embed_dim = 128;
        c.divide_channels = 4;
        c.num_layers = 8, c.kernel_size = 7, c.ffn_dim = 128;
        c.share_all_embeddings = true;
      });
  add("pervasive_tiny", "tiny 2020-style model for tests", [](PervasiveConfig& c) {
    c.encoder_embed_dim = c.decoder_embed_dim = 16;
    c.num_layers = 2, c.kernel_size = 3, c.ffn_dim = 32;
    c.aggregator = "max";
    c.embeddings_dropout = c.convolution_dropout = c.prediction_dropout = 0;
    c.add_positional_embeddings = true;
    c.share_decoder_input_output_embed = true;
  });
  add("pervasive_densenet_tiny", "tiny 2018-style DenseNet model for tests", [](PervasiveConfig& c) {
    c.encoder_embed_dim = c.decoder_embed_dim = 8;
    c.convnet = "densenet";
    c.num_layers = 3, c.growth_rate = 4, c.bn_size = 2, c.kernel_size = 3;
    c.aggregator = "max";
    c.embeddings_dropout = c.convolution_dropout = c.prediction_dropout = 0;
    c.share_decoder_input_output_embed = true;
  });
}

}  // namespace leanseq::models

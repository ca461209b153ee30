#include "leanseq/models/classifier.h"

#include <cmath>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/models/registry.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/lightconv.h"
#include "leanseq/nn/linear.h"
#include "leanseq/nn/transformer_layer.h"

namespace leanseq::models {

void ClassifierConfig::visit(ConfigVisitor& v) {
  v.field("encoder", encoder, "sentence encoder: disan, transformer or lightconv");
  v.field("embed_dim", embed_dim, "word embedding size");
  v.field("hidden_dim", hidden_dim, "DiSAN: width of each direction; transformer/lightconv: layer width");
  v.field("layers", layers, "transformer/lightconv: encoder layers");
  v.field("heads", heads, "transformer/lightconv: attention or convolution heads");
  v.field("ffn_dim", ffn_dim, "transformer/lightconv: feed-forward inner size");
  v.field("kernel_size", kernel_size, "lightconv: kernel width (odd)");
  v.field("pooling", pooling, "mean, max or source2token (empty: source2token for disan, mean otherwise)");
  v.field("activation", activation, "elu or relu (DiSAN blocks, source2token, head)");
  v.field("dropout", dropout, "dropout probability", Range::half_open(0, 1));
  v.field("classifier_hidden", classifier_hidden, "hidden units of the MLP head");
  v.field("max_positions", max_positions, "longest input in tokens (longer ones are cut)", Range::at_least(1));
  a2.visit(v, "");
  v.field("pair", pair, "sentence-pair input (set from the data)");
  v.field("num_classes", num_classes, "number of labels (set from the data)");
}

std::string ClassifierConfig::pooling_kind() const {
  if (!pooling.empty()) return pooling;
  return encoder == "disan" ? "source2token" : "mean";
}

int64_t ClassifierConfig::token_dim() const { return encoder == "disan" ? 2 * hidden_dim : hidden_dim; }

std::string ClassifierConfig::summary() const {
  std::ostringstream os;
  os << "text classifier: " << encoder << " encoder, embed " << embed_dim << ", hidden " << hidden_dim;
  if (encoder != "disan") os << ", layers " << layers << ", heads " << heads;
  os << ", pooling " << pooling_kind() << ", dropout " << dropout << a2.describe("encoder ");
  return os.str();
}

void ClassifierConfig::validate() const {
  if (encoder != "disan" && encoder != "transformer" && encoder != "lightconv") {
    throw ConfigError("model.encoder: '" + encoder + "' is not disan, transformer or lightconv");
  }
  auto p = pooling_kind();
  if (p != "mean" && p != "max" && p != "source2token") {
    throw ConfigError("model.pooling: '" + pooling + "' is not mean, max or source2token");
  }
  if (activation != "elu" && activation != "relu") {
    throw ConfigError("model.activation: '" + activation + "' is not elu or relu");
  }
  if (embed_dim <= 0 || hidden_dim <= 0 || classifier_hidden <= 0 || max_positions <= 0) {
    throw ConfigError("model: embed_dim, hidden_dim, classifier_hidden and max_positions must be positive");
  }
  if (encoder != "disan") {
    if (layers <= 0 || heads <= 0 || ffn_dim <= 0) throw ConfigError("model: layers, heads and ffn_dim must be positive");
    if (hidden_dim % heads != 0) {
      throw ConfigError("model.hidden_dim (" + std::to_string(hidden_dim) + ") must be a multiple of model.heads (" +
                        std::to_string(heads) + ")");
    }
  }
  if (encoder == "lightconv" && (kernel_size <= 0 || kernel_size % 2 == 0)) {
    throw ConfigError("model.kernel_size must be odd and positive");
  }
  a2.validate(encoder == "disan" ? 1 : layers, "");
  if (num_classes < 2) throw ConfigError("model.num_classes must be at least 2");
}

SentenceClassifierImpl::SentenceClassifierImpl(const ClassifierConfig& cfg, int64_t vocab_size) : cfg_(cfg) {
  cfg_.validate();
  disan_ = cfg.encoder == "disan";
  const auto pooling = cfg.pooling_kind();
  pooling_ = pooling == "source2token" ? Pooling::source2token : pooling == "max" ? Pooling::max : Pooling::mean;
  activation_ = nn::parse_activation(cfg.activation, "model.activation");
  embed_tokens = register_module("embed_tokens", nn::make_embedding(vocab_size, cfg.embed_dim, nn::kPadIndex));
  if (disan_) {
    disa = register_module("disa", nn::DiSAEncoder(cfg.embed_dim, cfg.hidden_dim, activation_, cfg.dropout));
  } else {
    embed_positions = register_module(
        "embed_positions", nn::PositionalEmbedding(cfg.hidden_dim, nn::kPadIndex, cfg.max_positions, false));
    if (cfg.embed_dim != cfg.hidden_dim) input_proj = register_module("input_proj", nn::make_linear(cfg.embed_dim, cfg.hidden_dim));
    layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < cfg.layers; ++i) {
      if (cfg.encoder == "transformer") {
        nn::TransformerLayerOptions o;
        o.embed_dim = cfg.hidden_dim, o.ffn_dim = cfg.ffn_dim, o.heads = cfg.heads, o.dropout = cfg.dropout;
        layers->push_back(nn::TransformerEncoderLayer(o));
      } else {
        nn::LightConvLayerOptions o;
        o.embed_dim = o.conv_dim = cfg.hidden_dim, o.ffn_dim = cfg.ffn_dim, o.heads = cfg.heads;
        o.kernel_size = cfg.kernel_size, o.dynamic = false, o.dropout = cfg.dropout, o.input_dropout = cfg.dropout;
        o.encoder_attention = false;
        layers->push_back(nn::LightConvEncoderLayer(o));
      }
    }
  }
  const int64_t width = cfg.token_dim(), n_layers = disan_ ? 1 : cfg.layers;
  a2 = cfg.a2.make(*this, n_layers, width, false, cfg.dropout, nn::BlockNorm::post);  // post-norm layers
  if (pooling_ == Pooling::source2token) {
    source2token = register_module("source2token", nn::Source2Token(cfg.token_dim(), activation_, cfg.dropout));
  }
  const int64_t features = cfg.token_dim() * (cfg.pair ? 4 : 1);
  pre_logits = register_module("pre_logits", nn::make_linear(features, cfg.classifier_hidden));
  out = register_module("out", nn::make_linear(cfg.classifier_hidden, cfg.num_classes));
}

torch::Tensor SentenceClassifierImpl::encode(const torch::Tensor& tokens_in) {
  auto tokens = tokens_in.size(1) > cfg_.max_positions ? tokens_in.narrow(1, 0, cfg_.max_positions) : tokens_in;
  auto pads = tokens.eq(nn::kPadIndex);
  auto x = embed_tokens(tokens);
  if (disan_) {
    auto h = disa(nn::maybe_dropout(x, cfg_.dropout, is_training()), pads);
    return a2[0] ? a2[0](h, pads) : h;
  }
  if (input_proj) x = input_proj(x);
  x = x * std::sqrt(static_cast<double>(cfg_.hidden_dim)) + embed_positions(tokens);
  x = nn::maybe_dropout(x, cfg_.dropout, is_training());
  nn::SharedAttention shared;
  for (size_t i = 0; i < layers->size(); ++i) {
    if (auto* t = layers[i]->as<nn::TransformerEncoderLayerImpl>()) {
      x = t->forward(x, pads, shared);
    } else {
      x = layers[i]->as<nn::LightConvEncoderLayerImpl>()->forward(x, pads);
    }
    if (a2[i]) x = a2[i](x, pads);
  }
  return x.masked_fill(pads.unsqueeze(-1), 0.0);
}

torch::Tensor SentenceClassifierImpl::sentence(const torch::Tensor& tokens) {
  auto x = encode(tokens);
  auto pads = tokens.narrow(1, 0, x.size(1)).eq(nn::kPadIndex);
  if (pooling_ == Pooling::source2token) return source2token(x, pads);
  if (pooling_ == Pooling::max) return x.masked_fill(pads.unsqueeze(-1), -1e30).amax(1);
  auto n = pads.logical_not().sum(1, true).clamp_min(1).to(x.dtype());
  return x.sum(1) / n;
}

torch::Tensor SentenceClassifierImpl::forward(const torch::Tensor& tokens, const torch::Tensor& tokens2) {
  auto u = sentence(tokens);
  torch::Tensor features = u;
  if (cfg_.pair) {
    TORCH_CHECK(tokens2.defined(), "a sentence-pair classifier needs two inputs");
    auto v = sentence(tokens2);
    features = torch::cat({u, v, u - v, u * v}, -1);
  }
  auto h = nn::activate(pre_logits(nn::maybe_dropout(features, cfg_.dropout, is_training())), activation_);
  return out(nn::maybe_dropout(h, cfg_.dropout, is_training()));
}

SentenceClassifier build_classifier(const ClassifierConfig& cfg, int64_t vocab_size) {
  return SentenceClassifier(cfg, vocab_size);
}

void register_classifiers(Registry& reg) {
  reg.add_family({"classifier", [] { return std::make_shared<ClassifierConfig>(); },
                  [](const ModelConfig&, const VocabInfo&) -> std::shared_ptr<Seq2SeqModel> {
                    throw ConfigError("this arch is a text classifier: train it with 'leanseq train --task classify'");
                  }});
  auto add = preset_adder<ClassifierConfig>(reg, "classifier");
  add("disan", "DiSAN sentence encoder (Shen et al. 2018): 300-dim words, 300 per direction, source2token",
      [](ClassifierConfig&) {});
  add("disan_small", "DiSAN with 128-dim words and 128 per direction, for CPU work", [](ClassifierConfig& c) {
    c.embed_dim = c.hidden_dim = c.classifier_hidden = 128;
  });
  add("transformer_classifier", "mean-pooled Transformer encoder (2 layers, 300 dims, 4 heads) for comparison",
      [](ClassifierConfig& c) { c.encoder = "transformer"; });
  add("lightconv_classifier", "mean-pooled LightConv encoder (2 layers, 300 dims, kernel 3) for comparison",
      [](ClassifierConfig& c) { c.encoder = "lightconv"; });
}

}  // namespace leanseq::models

#include "leanseq/models/lightconv.h"

#include <cmath>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/models/registry.h"
#include "leanseq/nn/functional.h"

namespace leanseq::models {

namespace {
void visit_side(ConfigVisitor& v, const std::string& p, LightConvSideConfig& s) {
  v.field(p + ".embed_dim", s.embed_dim, "embedding dimension");
  v.field(p + ".conv_dim", s.conv_dim, "convolution channels (0: embed_dim)");
  v.field(p + ".ffn_embed_dim", s.ffn_embed_dim, "feed-forward inner dimension");
  v.field(p + ".layers", s.layers, "number of layers");
  v.field(p + ".attention_heads", s.attention_heads, "convolution heads (and encoder-attention heads in the decoder)");
  v.field(p + ".kernel_size_list", s.kernel_size_list, "kernel size per layer, e.g. 3,7,15,31 (one value: all layers)");
  v.field(p + ".conv_type", s.conv_type, "dynamic or lightweight");
  v.field(p + ".glu", s.glu, "input projection to 2 * conv_dim followed by a GLU");
  v.field(p + ".normalize_before", s.normalize_before, "pre-norm (LayerNorm before each block)");
  v.field(p + ".learned_pos", s.learned_pos, "learned instead of sinusoidal positions");
  s.a2.visit(v, p + ".");
}

// The keys of the conv blocks, common to the translation model and the language model.
void visit_conv_block(ConfigVisitor& v, LightConvConfig& c) {
  v.field("dropout", c.dropout, "dropout probability", kProbability);
  v.field("relu_dropout", c.relu_dropout, "dropout after the FFN activation", kProbability);
  v.field("input_dropout", c.input_dropout, "dropout on the input of each conv block", kProbability);
  v.field("weight_dropout", c.weight_dropout, "DropConnect on the normalised convolution kernels", kProbability);
  v.field("weight_softmax", c.weight_softmax, "softmax-normalise the kernels over their taps");
  v.field("conv_impl", c.conv_impl, "convolution implementation: auto, unfold, band or kernel");
}

}  // namespace

std::vector<int64_t> LightConvSideConfig::kernel_sizes(const std::string& key) const {
  // Accepts "3,7,15", "[3, 7, 15]" (fairseq's notation) or one size for every layer.
  std::vector<int64_t> out;
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) return;
    size_t used = 0;
    int64_t k = -1;
    try {
      k = std::stoll(cur, &used);
    } catch (const std::exception&) {
    }
    if (used != cur.size() || k < 1) {
      throw ConfigError(key + ": '" + cur + "' is not a positive kernel size (expected e.g. 3,7,15,31)");
    }
    out.push_back(k);
    cur.clear();
  };
  for (char c : kernel_size_list) {
    if (c == ',' || c == ' ' || c == '[' || c == ']') {
      flush();
    } else {
      cur += c;
    }
  }
  flush();
  if (out.size() == 1) out.assign(static_cast<size_t>(std::max<int64_t>(layers, 0)), out[0]);
  if (static_cast<int64_t>(out.size()) != layers) {
    throw ConfigError(key + ": " + std::to_string(out.size()) + " kernel sizes for " + std::to_string(layers) +
                      " layers");
  }
  return out;
}

LightConvConfig::LightConvConfig() {
  decoder.layers = 6;
  decoder.kernel_size_list = "3,7,15,31,31,31";
}

void LightConvConfig::visit(ConfigVisitor& v) {
  visit_side(v, "encoder", encoder);
  visit_side(v, "decoder", decoder);
  visit_conv_block(v, *this);
  v.field("attention_dropout", attention_dropout, "dropout on encoder-attention weights", kProbability);
  v.field("share_decoder_input_output_embed", share_decoder_input_output_embed, "tie decoder input and output embeddings");
  v.field("share_all_embeddings", share_all_embeddings, "one embedding for encoder, decoder and output (joint vocabulary)");
  v.field("max_source_positions", max_source_positions, "longest source in tokens", Range::at_least(1));
  v.field("max_target_positions", max_target_positions, "longest target in tokens", Range::at_least(1));
}

std::string LightConvConfig::summary() const {
  std::ostringstream os;
  os << encoder.conv_type << "/" << decoder.conv_type << " conv, layers " << encoder.layers << "+" << decoder.layers
     << ", dim " << encoder.embed_dim << ", ffn " << encoder.ffn_embed_dim << ", heads " << encoder.attention_heads
     << ", kernels " << encoder.kernel_size_list << " / " << decoder.kernel_size_list << ", dropout " << dropout
     << encoder.a2.describe("encoder ") << decoder.a2.describe("decoder ");
  return os.str();
}

namespace {
void validate_side(const std::string& name, const LightConvSideConfig& s) {
  if (s.embed_dim <= 0 || s.layers < 0 || s.attention_heads <= 0 || s.ffn_embed_dim <= 0 || s.conv_dim < 0) {
    throw ConfigError("model: " + name + " dimensions, layers and heads must be positive");
  }
  for (int64_t dim : {s.resolved_conv_dim(), s.embed_dim}) {
    if (dim % s.attention_heads != 0) {
      throw ConfigError("model: " + name + " dimension " + std::to_string(dim) + " is not divisible by " + name +
                        ".attention_heads " + std::to_string(s.attention_heads));
    }
  }
  if (s.conv_type != "dynamic" && s.conv_type != "lightweight") {
    throw ConfigError("model." + name + ".conv_type: expected dynamic or lightweight, got '" + s.conv_type + "'");
  }
  s.kernel_sizes("model." + name + ".kernel_size_list");
  s.a2.validate(s.layers, name + ".");
}
}  // namespace

void LightConvConfig::validate() const {
  validate_side("encoder", encoder);
  validate_side("decoder", decoder);
  if (encoder.embed_dim != decoder.embed_dim) {
    throw ConfigError("model: encoder.embed_dim and decoder.embed_dim must be equal (encoder-decoder attention)");
  }
  kernels::parse_lightconv_impl(conv_impl, "model.conv_impl");
}

nn::LightConvLayerOptions LightConvConfig::layer_options(const LightConvSideConfig& side, int64_t kernel_size) const {
  nn::LightConvLayerOptions o;
  o.embed_dim = side.embed_dim, o.conv_dim = side.resolved_conv_dim(), o.ffn_dim = side.ffn_embed_dim;
  o.heads = side.attention_heads, o.kernel_size = kernel_size;
  o.dynamic = side.conv_type == "dynamic", o.glu = side.glu, o.normalize_before = side.normalize_before;
  o.weight_softmax = weight_softmax;
  o.dropout = dropout, o.relu_dropout = relu_dropout, o.input_dropout = input_dropout;
  o.weight_dropout = weight_dropout, o.attention_dropout = attention_dropout;
  o.impl = kernels::parse_lightconv_impl(conv_impl, "model.conv_impl");
  o.encoder_attention = !decoder_only;
  return o;
}

LightConvLMConfig::LightConvLMConfig() {
  decoder_only = true;
  decoder.normalize_before = true;
  share_decoder_input_output_embed = false;
}

void LightConvLMConfig::visit(ConfigVisitor& v) {
  visit_side(v, "decoder", decoder);
  visit_conv_block(v, *this);
  v.field("share_decoder_input_output_embed", share_decoder_input_output_embed, "tie input and output embeddings");
  v.field("max_target_positions", max_target_positions, "longest sample in tokens", Range::at_least(1));
}

std::string LightConvLMConfig::summary() const {
  std::ostringstream os;
  os << decoder.conv_type << " conv language model, layers " << decoder.layers << ", dim " << decoder.embed_dim
     << ", ffn " << decoder.ffn_embed_dim << ", heads " << decoder.attention_heads << ", kernels "
     << decoder.kernel_size_list << ", dropout " << dropout << decoder.a2.describe("");
  return os.str();
}

void LightConvLMConfig::validate() const {
  validate_side("decoder", decoder);
  kernels::parse_lightconv_impl(conv_impl, "model.conv_impl");
  if (!decoder.normalize_before) {
    throw ConfigError("model.decoder.normalize_before: lightconv_lm is pre-norm only (as in fairseq)");
  }
}

// ---------------------------------------------------------------- encoder

LightConvEncoderImpl::LightConvEncoderImpl(const LightConvConfig& cfg, torch::nn::Embedding embed)
    : dropout_(cfg.dropout) {
  const auto& s = cfg.encoder;
  embed_scale_ = std::sqrt(static_cast<double>(s.embed_dim));
  embed_tokens = register_module("embed_tokens", embed);
  embed_positions =
      register_module("embed_positions", nn::PositionalEmbedding(s.embed_dim, nn::kPadIndex, cfg.max_source_positions, s.learned_pos));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t k : s.kernel_sizes("model.encoder.kernel_size_list")) {
    layers->push_back(nn::LightConvEncoderLayer(cfg.layer_options(s, k)));
  }
  a2 = s.a2.make(*this, s.layers, s.embed_dim, false, cfg.dropout, host_norm(s.normalize_before));
  layer_norm = nn::optional_layer_norm(s.normalize_before, s.embed_dim);
  if (layer_norm) register_module("layer_norm", layer_norm);
}

EncoderOut LightConvEncoderImpl::forward(const torch::Tensor& src) {
  auto padding_mask = src.eq(nn::kPadIndex);  // [B, S]
  auto x = nn::maybe_dropout(nn::scaled_plus_positions(embed_tokens(src), embed_scale_, embed_positions(src)), dropout_, is_training());
  auto mask = nn::mask_if_any(padding_mask);
  for (size_t i = 0; i < layers->size(); ++i) {
    x = layers[i]->as<nn::LightConvEncoderLayer>()->forward(x, mask);
    if (a2[i]) x = a2[i](x, mask);
  }
  if (layer_norm) x = layer_norm(x);
  return {x, padding_mask, {}};
}

// ---------------------------------------------------------------- decoder

LightConvDecoderImpl::LightConvDecoderImpl(const LightConvConfig& cfg, torch::nn::Embedding embed, int64_t vocab)
    : dropout_(cfg.dropout) {
  const auto& s = cfg.decoder;
  embed_scale_ = std::sqrt(static_cast<double>(s.embed_dim));
  embed_tokens = register_module("embed_tokens", embed);
  embed_positions =
      register_module("embed_positions", nn::PositionalEmbedding(s.embed_dim, nn::kPadIndex, cfg.max_target_positions, s.learned_pos));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t k : s.kernel_sizes("model.decoder.kernel_size_list")) {
    nn::LightConvDecoderLayer layer(cfg.layer_options(s, k));
    layer->name_state(nn::state_name("layers", layers->size()));
    layers->push_back(layer);
  }
  a2 = s.a2.make(*this, s.layers, s.embed_dim, true, cfg.dropout, host_norm(s.normalize_before));
  layer_norm = nn::optional_layer_norm(s.normalize_before && !cfg.decoder_only, s.embed_dim);
  if (layer_norm) register_module("layer_norm", layer_norm);
  output_weight = nn::register_output_projection(
      *this, embed_tokens, cfg.share_decoder_input_output_embed || cfg.share_all_embeddings, vocab, s.embed_dim);
}

DecoderOut LightConvDecoderImpl::forward(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn) {
  auto enc_mask = nn::mask_if_any(enc.padding_mask);
  auto x = nn::maybe_dropout(nn::scaled_plus_positions(embed_tokens(prev_tokens), embed_scale_, embed_positions(prev_tokens)), dropout_,
                             is_training());
  auto self_mask = nn::mask_if_any(prev_tokens.eq(nn::kPadIndex));
  return run_decoder_stack(
      x, layers->size(),
      [&](size_t i, const torch::Tensor& h, bool attn) {
        auto r = layers[i]->as<nn::LightConvDecoderLayer>()->forward(h, enc.out, enc_mask, attn);
        if (a2[i]) r.out = a2[i](r.out, self_mask);
        return r;
      },
      need_attn, layer_norm, output_weight, output_packed);
}

DecoderOut LightConvDecoderImpl::step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state,
                                      bool need_attn) {
  const int64_t B = tokens.size(0), n = tokens.size(1);
  auto x = nn::maybe_dropout(nn::scaled_plus_positions(embed_tokens(tokens), embed_scale_, embed_positions->at_steps(state.steps, n, B, tokens.device())),
                             dropout_, is_training());
  auto token_padding = nn::mask_if_any(tokens.eq(nn::kPadIndex));
  auto out = run_decoder_stack(
      x, layers->size(),
      [&](size_t i, const torch::Tensor& h, bool attn) {
        auto r = layers[i]->as<nn::LightConvDecoderLayer>()->step(h, enc.out, enc.padding_mask, state, attn);
        r.out = step_a2(a2, i, r.out, state, token_padding);
        return r;
      },
      need_attn, layer_norm, output_weight, output_packed, {}, state.output_rows.get(), {}, state.log_probs);
  state.steps += n;
  return out;
}

// ---------------------------------------------------------------- presets

namespace {
void set_side(LightConvSideConfig& s, int64_t dim, int64_t ffn, int64_t heads) {
  s.embed_dim = dim, s.ffn_embed_dim = ffn, s.attention_heads = heads;
}
// fairseq's lightconv_wmt_en_de_big.
void big(LightConvConfig& c) {
  c.attention_dropout = c.weight_dropout = 0.1;
  set_side(c.encoder, 1024, 4096, 16);
  set_side(c.decoder, 1024, 4096, 16);
  c.dropout = 0.3;
}
// The small CPU presets: transformer_small's dimensions (256 / 1024, 4 heads, 3 + 3 layers, shared
// embeddings) with the IWSLT recipe's dropouts and no GLU.
void small(LightConvConfig& c, const std::string& conv_type) {
  set_side(c.encoder, 256, 1024, 4);
  set_side(c.decoder, 256, 1024, 4);
  c.encoder.layers = c.decoder.layers = 3;
  c.encoder.kernel_size_list = c.decoder.kernel_size_list = "3,7,15";
  c.encoder.glu = c.decoder.glu = false;
  c.encoder.conv_type = c.decoder.conv_type = conv_type;
  c.dropout = 0.2, c.attention_dropout = c.weight_dropout = 0.1, c.input_dropout = 0.0;
  c.share_all_embeddings = true;
}
void tiny(LightConvConfig& c, const std::string& conv_type) {
  set_side(c.encoder, 32, 64, 2);
  set_side(c.decoder, 32, 64, 2);
  c.encoder.layers = c.decoder.layers = 2;
  c.encoder.kernel_size_list = c.decoder.kernel_size_list = "3,5";
  c.encoder.conv_type = c.decoder.conv_type = conv_type;
  c.dropout = c.input_dropout = 0.0;
  c.share_decoder_input_output_embed = true;
}
}  // namespace

void register_lightconv(Registry& reg) {
  reg.add_family(encoder_decoder_family<LightConvConfig, LightConvModel>("lightconv"));
  auto add = preset_adder<LightConvConfig>(reg, "lightconv");
  add("lightconv", "fairseq base LightConv (dynamic convolutions; 7+6 layers, kernels 3..31)", [](LightConvConfig&) {});
  add("lightconv_iwslt_de_en", "fairseq IWSLT'14 De-En LightConv (no GLU, weight dropout 0.1)", [](LightConvConfig& c) {
    set_side(c.encoder, 512, 1024, 4);
    set_side(c.decoder, 512, 1024, 4);
    c.attention_dropout = c.weight_dropout = 0.1;
    c.encoder.glu = c.decoder.glu = false;
    c.input_dropout = 0.0;
  });
  add("lightconv_wmt_en_de", "fairseq WMT En-De LightConv (the base architecture)", [](LightConvConfig&) {});
  add("lightconv_wmt_en_de_big", "fairseq WMT En-De big LightConv (1024 dims, 16 heads, dropout 0.3)", big);
  add("lightconv_wmt_en_fr_big", "fairseq WMT En-Fr big LightConv (dropout 0.1)", [](LightConvConfig& c) {
    big(c);
    c.dropout = 0.1;
  });
  add("lightconv_wmt_zh_en_big", "fairseq WMT Zh-En big LightConv (dropouts 0.2)", [](LightConvConfig& c) {
    big(c);
    c.dropout = c.attention_dropout = c.weight_dropout = 0.2;
  });
  add("lightconv_small", "small lightweight-convolution model for CPU work (transformer_small's dimensions)",
      [](LightConvConfig& c) { small(c, "lightweight"); });
  add("dynamicconv_small", "small dynamic-convolution model for CPU work (transformer_small's dimensions)",
      [](LightConvConfig& c) { small(c, "dynamic"); });
  reg.add_family(language_model_family<LightConvLMConfig, LightConvLanguageModel>("lightconv_lm"));
  auto add_lm = preset_adder<LightConvLMConfig>(reg, "lightconv_lm");
  add_lm("lightconv_lm", "fairseq LightConv language model (dynamic convolutions, 6 pre-norm layers)",
         [](LightConvLMConfig& c) { c.decoder.layers = 6; });
  add_lm("lightconv_lm_gbw", "fairseq Billion Word LightConv language model (FFN 4096, 16 heads)", [](LightConvLMConfig& c) {
    c.decoder.ffn_embed_dim = 4096;
    c.decoder.attention_heads = 16;
    c.attention_dropout = c.weight_dropout = 0.1;
  });
  add_lm("lightconv_lm_small", "small dynamic-convolution language model for CPU work (256 dims, 4 layers)",
         [](LightConvLMConfig& c) {
           set_side(c.decoder, 256, 1024, 4);
           c.decoder.layers = 4;
           c.decoder.kernel_size_list = "3,7,15,31";
           c.dropout = 0.2;
           c.share_decoder_input_output_embed = true;
         });
  add_lm("lightconv_lm_tiny", "tiny language model for tests", [](LightConvLMConfig& c) {
    set_side(c.decoder, 32, 64, 2);
    c.decoder.layers = 2;
    c.decoder.kernel_size_list = "3,5";
    c.dropout = c.input_dropout = 0.0;
  });
  add("lightconv_tiny", "tiny lightweight-convolution model for tests", [](LightConvConfig& c) { tiny(c, "lightweight"); });
  add("dynamicconv_tiny", "tiny dynamic-convolution model for tests", [](LightConvConfig& c) { tiny(c, "dynamic"); });
}

}  // namespace leanseq::models

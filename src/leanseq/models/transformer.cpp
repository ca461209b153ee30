#include "leanseq/models/transformer.h"

#include <cmath>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/models/a2_blocks.h"
#include "leanseq/models/layer_spec.h"
#include "leanseq/models/registry.h"
#include "leanseq/nn/functional.h"

namespace leanseq::models {

namespace {
// A side's input: scaled embeddings plus positions, through the optional LayerNorm over them
// (model.layernorm_embedding), then dropout; the encoder and the decoder (full pass and steps) alike.
// With `project_in` (a language model's decoder_input_dim), the scaled embeddings are projected
// to the model's width before the positions are added, as fairseq does.
torch::Tensor embedded_input(torch::nn::Embedding& embed_tokens, const torch::Tensor& tokens, double scale,
                             const torch::Tensor& positions, torch::nn::LayerNorm& layernorm_embedding, double dropout,
                             bool training, const torch::Tensor& project_in = {}) {
  auto x = project_in.defined() ? kernels::linear(embed_tokens(tokens) * scale, project_in, {}) + positions
                                : nn::scaled_plus_positions(embed_tokens(tokens), scale, positions);
  if (layernorm_embedding) x = layernorm_embedding(x);
  return nn::maybe_dropout(x, dropout, training);
}

void visit_side(ConfigVisitor& v, const std::string& p, TransformerSideConfig& s) {
  v.field(p + ".embed_dim", s.embed_dim, "embedding dimension");
  v.field(p + ".ffn_embed_dim", s.ffn_embed_dim, "feed-forward inner dimension");
  v.field(p + ".layers", s.layers, "number of layers");
  v.field(p + ".attention_heads", s.attention_heads, "number of attention heads");
  v.field(p + ".normalize_before", s.normalize_before, "pre-norm (LayerNorm before each sublayer)");
  v.field(p + ".learned_pos", s.learned_pos, "learned instead of sinusoidal positions");
  s.a2.visit(v, p + ".");
  v.field(p + ".self_attn_groups", s.self_attn_groups,
          "SAN: blocks of layers sharing the first layer's self-attention distribution, e.g. \"0-1,2-5\"");
}

// The keys the translation model and the language model share.
void visit_common(ConfigVisitor& v, TransformerConfig& c) {
  v.field("dropout", c.dropout, "dropout probability", kProbability);
  v.field("attention_dropout", c.attention_dropout, "dropout on attention weights", kProbability);
  v.field("activation_dropout", c.activation_dropout, "dropout after the FFN activation", kProbability);
  v.field("activation_fn", c.activation_fn, "relu, gelu, gelu_accurate (gelu's tanh approximation) or swish");
  v.field("share_decoder_input_output_embed", c.share_decoder_input_output_embed, "tie decoder input and output embeddings");
  v.field("no_scale_embedding", c.no_scale_embedding, "do not scale embeddings by sqrt(dim)");
  v.field("layernorm_embedding", c.layernorm_embedding,
          "a LayerNorm over the embeddings plus positions (fairseq's --layernorm-embedding; both sides of a translation model)");
  v.field("decoder.output_dim", c.decoder.output_dim,
          "the decoder's output dimension: a projection to it before the output layer when it differs from "
          "decoder.embed_dim (fairseq's --decoder-output-dim; 0: decoder.embed_dim)");
}

}  // namespace

void TransformerConfig::visit(ConfigVisitor& v) {
  visit_side(v, "encoder", encoder);
  v.field("encoder.type", encoder_type,
          "transformer, or disan (DiSAN's directional self-attention blocks replace the encoder layers)");
  visit_side(v, "decoder", decoder);
  v.field("decoder.encoder_attn_groups", decoder.encoder_attn_groups,
          "SAN: blocks of decoder layers sharing the first layer's encoder-attention output, e.g. \"0-1,2-5\"");
  v.field("decoder.alignment_layer", decoder.alignment_layer,
          "the decoder layer whose encoder attention gives alignments (--print-alignment, --replace-unk); negative: "
          "counted from the last (-1)");
  v.field("decoder.alignment_heads", decoder.alignment_heads,
          "how many of the alignment layer's first attention heads are averaged for alignments (0: all)",
          Range::at_least(0));
  v.field("decoder.average_attention", decoder.average_attention,
          "AAN: cumulative-average attention with gates instead of decoder self-attention");
  v.field("decoder.average_attention_ffn", decoder.average_attention_ffn,
          "AAN: a feed-forward layer (ffn_embed_dim wide) over the average");
  v.field("decoder.average_attention_fold", decoder.average_attention_fold,
          "AAN with its FFN: decoding steps compute the gate in the FFN's two products (fewer, larger products; slower on CPUs, docs/san.md)");
  visit_common(v, *this);
  v.field("share_all_embeddings", share_all_embeddings, "one embedding for encoder, decoder and output (joint vocabulary)");
  v.field("decoder.output_bias", decoder.output_bias,
          "a bias on the output projection (OpenNMT-py's generator; CTranslate2's decoder/projection/bias)");
  v.field("max_source_positions", max_source_positions, "longest source in tokens", Range::at_least(1));
  v.field("max_target_positions", max_target_positions, "longest target in tokens", Range::at_least(1));
}

std::string TransformerConfig::summary() const {
  std::ostringstream os;
  os << "layers " << encoder.layers << "+" << decoder.layers << ", dim " << encoder.embed_dim << ", ffn "
     << encoder.ffn_embed_dim << ", heads " << encoder.attention_heads << ", dropout " << dropout;
  // The options that change the architecture, where set.
  if (encoder_type != "transformer") os << ", " << encoder_type << " encoder";
  if (!encoder.self_attn_groups.empty()) os << ", encoder SAN blocks " << encoder.self_attn_groups;
  if (!decoder.self_attn_groups.empty()) os << ", decoder SAN blocks " << decoder.self_attn_groups;
  if (!decoder.encoder_attn_groups.empty()) os << ", encoder-attention SAN blocks " << decoder.encoder_attn_groups;
  if (decoder.average_attention) os << ", AAN decoder" << (decoder.average_attention_ffn ? "" : " without FFN");
  os << encoder.a2.describe("encoder ") << decoder.a2.describe("decoder ");
  return os.str();
}

void TransformerConfig::validate() const {
  for (const auto* s : {&encoder, &decoder}) {
    if (s->embed_dim <= 0 || s->layers < 0 || s->attention_heads <= 0 || s->ffn_embed_dim <= 0) {
      throw ConfigError("model: dimensions, layers and heads must be positive");
    }
    if (s->embed_dim % s->attention_heads != 0) {
      throw ConfigError("model: embed_dim " + std::to_string(s->embed_dim) + " is not divisible by attention_heads " +
                        std::to_string(s->attention_heads));
    }
  }
  if (encoder_type != "transformer" && encoder_type != "disan") {
    throw ConfigError("model.encoder.type: '" + encoder_type + "' is not transformer or disan");
  }
  if (encoder_type == "disan" && (encoder.embed_dim % 2 != 0 || !encoder.self_attn_groups.empty())) {
    throw ConfigError("model.encoder.type disan needs an even encoder.embed_dim and no encoder.self_attn_groups");
  }
  // The DiSAN encoder is one block: an A2 block can follow it as layer 0.
  encoder.a2.validate(encoder_type == "disan" ? 1 : encoder.layers, "encoder.");
  decoder.a2.validate(decoder.layers, "decoder.");
  for (const char* side : {"encoder", "decoder"}) layer_options(side);  // malformed blocks throw, naming their key
  if (decoder.average_attention && !decoder.self_attn_groups.empty()) {
    throw ConfigError("model.decoder.self_attn_groups: average attention has no attention distribution to share");
  }
  // The encoder-decoder attention takes keys of the encoder's width (fairseq's kdim = vdim); one
  // embedding for both sides needs one width.
  if (share_all_embeddings && encoder.embed_dim != decoder.embed_dim) {
    throw ConfigError("model.share_all_embeddings needs encoder.embed_dim " + std::to_string(encoder.embed_dim) +
                      " equal to decoder.embed_dim " + std::to_string(decoder.embed_dim));
  }
  if (decoder.layers > 0 && (decoder.alignment_layer < -decoder.layers || decoder.alignment_layer >= decoder.layers)) {
    throw ConfigError("model.decoder.alignment_layer " + std::to_string(decoder.alignment_layer) + " is not a layer of " +
                      std::to_string(decoder.layers) + " (0 to " + std::to_string(decoder.layers - 1) + ", or -1 to -" +
                      std::to_string(decoder.layers) + " from the last)");
  }
  if (decoder.alignment_heads > decoder.attention_heads) {
    throw ConfigError("model.decoder.alignment_heads " + std::to_string(decoder.alignment_heads) + " exceeds " +
                      "decoder.attention_heads " + std::to_string(decoder.attention_heads));
  }
  if (decoder.output_dim < 0) throw ConfigError("model.decoder.output_dim must be 0 (decoder.embed_dim) or positive");
  const int64_t input_dim = decoder.input_dim > 0 ? decoder.input_dim : decoder.embed_dim;
  const int64_t output_dim = decoder.output_dim > 0 ? decoder.output_dim : decoder.embed_dim;
  if (decoder.input_dim < 0) throw ConfigError("model.decoder.input_dim must be 0 (decoder.embed_dim) or positive");
  if (output_dim != input_dim && (share_decoder_input_output_embed || share_all_embeddings)) {
    throw ConfigError("model.decoder.output_dim " + std::to_string(output_dim) + " differs from the embeddings' width " +
                      std::to_string(input_dim) + ": the output layer cannot share the embeddings");
  }
  if (layernorm_embedding && encoder_type == "disan") {
    throw ConfigError("model.layernorm_embedding goes with the transformer encoder, not disan");
  }
  if (activation_fn != "relu" && activation_fn != "gelu" && activation_fn != "gelu_accurate" && activation_fn != "swish") {
    throw ConfigError("model: activation_fn must be relu, gelu, gelu_accurate or swish, got '" + activation_fn + "'");
  }
}

std::vector<nn::TransformerLayerOptions> TransformerConfig::layer_options(const std::string& name) const {
  const auto& side = name == "encoder" ? encoder : decoder;
  const std::string key = "model." + name + ".";
  auto self_block = parse_layer_groups(side.self_attn_groups, side.layers, key + "self_attn_groups");
  auto encoder_block = parse_layer_groups(side.encoder_attn_groups, side.layers, key + "encoder_attn_groups");
  std::vector<nn::TransformerLayerOptions> layers;
  for (int64_t i = 0; i < side.layers; ++i) {
    auto& o = layers.emplace_back(side_options(side));
    o.reuse_self_attn = self_block[i] != i;
    o.reuse_encoder_attn = encoder_block[i] != i;
    if (name == "decoder") o.encoder_embed_dim = encoder.embed_dim;
    o.no_encoder_attn = name == "decoder" && decoder_only;
  }
  return layers;
}

nn::TransformerLayerOptions TransformerConfig::side_options(const TransformerSideConfig& side) const {
  nn::TransformerLayerOptions o;
  o.average_self_attn = side.average_attention;
  o.average_ffn_dim = side.average_attention_ffn ? side.ffn_embed_dim : 0;
  o.average_fold = side.average_attention_fold;
  o.embed_dim = side.embed_dim;
  o.ffn_dim = side.ffn_embed_dim;
  o.heads = side.attention_heads;
  o.dropout = dropout;
  o.attention_dropout = attention_dropout;
  o.activation_dropout = activation_dropout;
  o.normalize_before = side.normalize_before;
  o.activation = nn::parse_activation(activation_fn, "model.activation_fn");
  return o;
}

// ---------------------------------------------------------------- language model

TransformerLMConfig::TransformerLMConfig() {
  decoder_only = true;
  decoder.normalize_before = true;
}

void TransformerLMConfig::visit(ConfigVisitor& v) {
  visit_side(v, "decoder", decoder);
  visit_common(v, *this);
  v.field("decoder.input_dim", decoder.input_dim,
          "the token embeddings' width, projected to decoder.embed_dim after scaling (fairseq's --decoder-input-dim; "
          "0: decoder.embed_dim)");
  v.field("max_target_positions", max_target_positions, "longest sample in tokens", Range::at_least(1));
}

std::string TransformerLMConfig::summary() const {
  std::ostringstream os;
  os << "decoder layers " << decoder.layers << ", dim " << decoder.embed_dim << ", ffn " << decoder.ffn_embed_dim
     << ", heads " << decoder.attention_heads << ", dropout " << dropout;
  if (!decoder.self_attn_groups.empty()) os << ", SAN blocks " << decoder.self_attn_groups;
  os << decoder.a2.describe("");
  return os.str();
}

void TransformerLMConfig::validate() const {
  TransformerConfig checked = *this;
  checked.encoder = checked.decoder;  // the encoder side is not built
  checked.TransformerConfig::validate();
}

// ---------------------------------------------------------------- encoder

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerConfig& cfg, torch::nn::Embedding embed)
    : dropout_(cfg.dropout) {
  const auto& s = cfg.encoder;
  embed_scale_ = cfg.no_scale_embedding ? 1.0 : std::sqrt(static_cast<double>(s.embed_dim));
  embed_tokens = register_module("embed_tokens", embed);
  layers = register_module("layers", torch::nn::ModuleList());
  if (cfg.encoder_type == "disan") {
    disa = register_module("disa", nn::DiSAEncoder(s.embed_dim, s.embed_dim / 2, nn::Activation::elu, cfg.dropout));
    a2 = s.a2.make(*this, 1, s.embed_dim, false, cfg.dropout, nn::BlockNorm::post);  // as after a classifier's DiSAN
    return;
  }
  embed_positions =
      register_module("embed_positions", nn::PositionalEmbedding(s.embed_dim, nn::kPadIndex, cfg.max_source_positions, s.learned_pos));
  for (const auto& o : cfg.layer_options("encoder")) layers->push_back(nn::TransformerEncoderLayer(o));
  a2 = s.a2.make(*this, s.layers, s.embed_dim, false, cfg.dropout, host_norm(s.normalize_before));
  layer_norm = nn::optional_layer_norm(s.normalize_before, s.embed_dim);
  if (layer_norm) register_module("layer_norm", layer_norm);
  layernorm_embedding = nn::optional_layer_norm(cfg.layernorm_embedding, s.embed_dim);
  if (layernorm_embedding) register_module("layernorm_embedding", layernorm_embedding);
}

EncoderOut TransformerEncoderImpl::forward(const torch::Tensor& src, AttentionMaps* maps) {
  auto padding_mask = src.eq(nn::kPadIndex);  // [B, S]
  if (disa) {
    auto e = nn::maybe_dropout(embed_tokens(src) * embed_scale_, dropout_, is_training());
    auto x = disa(e, padding_mask);
    if (a2[0]) x = a2[0](x, nn::mask_if_any(padding_mask));
    return {x, padding_mask, {}};
  }
  auto x = embedded_input(embed_tokens, src, embed_scale_, embed_positions(src), layernorm_embedding, dropout_, is_training());
  x = x * (1 - padding_mask.unsqueeze(-1).to(x.scalar_type()));
  auto mask = nn::mask_if_any(padding_mask);
  nn::SharedAttention shared;
  for (size_t i = 0; i < layers->size(); ++i) {
    x = layers[i]->as<nn::TransformerEncoderLayer>()->forward(x, mask, shared);
    if (maps) maps->encoder_self.push_back(shared.self_probs);
    if (a2[i]) x = a2[i](x, mask);
  }
  if (layer_norm) x = layer_norm(x);
  return {x, padding_mask, {}};
}

// ---------------------------------------------------------------- decoder

TransformerDecoderImpl::TransformerDecoderImpl(const TransformerConfig& cfg, torch::nn::Embedding embed, int64_t vocab)
    : dropout_(cfg.dropout) {
  const auto& s = cfg.decoder;
  embed_scale_ = cfg.no_scale_embedding ? 1.0 : std::sqrt(static_cast<double>(s.embed_dim));
  embed_tokens = register_module("embed_tokens", embed);
  embed_positions =
      register_module("embed_positions", nn::PositionalEmbedding(s.embed_dim, nn::kPadIndex, cfg.max_target_positions, s.learned_pos));
  layers = register_module("layers", torch::nn::ModuleList());
  const int64_t alignment = s.alignment_layer < 0 ? s.layers + s.alignment_layer : s.alignment_layer;
  size_t owner = 0;
  for (const auto& o : cfg.layer_options("decoder")) {
    nn::TransformerDecoderLayer layer(o);
    layer->name_state(nn::state_name("layers", layers->size()));
    layers->push_back(layer);
    if (!o.reuse_encoder_attn) owner = layers->size() - 1;
    if (static_cast<int64_t>(layers->size()) - 1 == alignment) alignment_layer_ = alignment, alignment_owner_ = owner;
  }
  if (s.alignment_heads > 0 && alignment >= 0 && alignment < s.layers && !cfg.decoder_only) {
    layers[alignment_owner_]->as<nn::TransformerDecoderLayer>()->encoder_attn->average_first_heads(s.alignment_heads);
  }
  a2 = s.a2.make(*this, s.layers, s.embed_dim, true, cfg.dropout, host_norm(s.normalize_before));
  layer_norm = nn::optional_layer_norm(s.normalize_before, s.embed_dim);
  if (layer_norm) register_module("layer_norm", layer_norm);
  layernorm_embedding = nn::optional_layer_norm(cfg.layernorm_embedding, s.embed_dim);
  if (layernorm_embedding) register_module("layernorm_embedding", layernorm_embedding);
  const int64_t input_dim = s.input_dim > 0 ? s.input_dim : s.embed_dim;
  if (input_dim != s.embed_dim) {
    project_in = register_module("project_in_dim", std::make_shared<torch::nn::Module>())
                     ->register_parameter("weight", torch::randn({s.embed_dim, input_dim}) *
                                                        std::pow(static_cast<double>(input_dim), -0.5));
  }
  const int64_t output_dim = s.output_dim > 0 ? s.output_dim : s.embed_dim;
  if (output_dim != s.embed_dim) {
    project_out = register_module("project_out_dim", std::make_shared<torch::nn::Module>())
                      ->register_parameter("weight", torch::randn({output_dim, s.embed_dim}) *
                                                         std::pow(static_cast<double>(s.embed_dim), -0.5));
  }
  output_weight = nn::register_output_projection(
      *this, embed_tokens, cfg.share_decoder_input_output_embed || cfg.share_all_embeddings, vocab, output_dim);
  if (s.output_bias) {
    output_bias = named_children()["output_projection"]->register_parameter("bias", torch::zeros({vocab}));
  }
}

DecoderOut TransformerDecoderImpl::forward(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn,
                                           AttentionMaps* maps) {
  auto x = embedded_input(embed_tokens, prev_tokens, embed_scale_, embed_positions(prev_tokens), layernorm_embedding,
                          dropout_, is_training(), project_in);
  auto self_mask = nn::mask_if_any(prev_tokens.eq(nn::kPadIndex));
  auto enc_mask = nn::mask_if_any(enc.padding_mask);
  nn::SharedAttention shared;
  return run_decoder_stack(
      x, layers->size(),
      [&](size_t i, const torch::Tensor& h, bool) {
        auto r = layers[i]->as<nn::TransformerDecoderLayer>()->forward(h, self_mask, enc.out, enc_mask,
                                                                       need_attn && returns_attn(i), shared);
        if (a2[i]) r.out = a2[i](r.out, self_mask);
        if (maps) {
          if (shared.self_probs.defined()) maps->decoder_self.push_back(shared.self_probs);
          maps->encoder_decoder.push_back(shared.encoder.probs);
        }
        return r;
      },
      need_attn, layer_norm, output_weight, output_packed, project_out, nullptr, output_bias);
}

DecoderOut TransformerDecoderImpl::step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state,
                                        bool need_attn) {
  const int64_t B = tokens.size(0), n = tokens.size(1);
  auto x = embedded_input(embed_tokens, tokens, embed_scale_, embed_positions->at_steps(state.steps, n, B, tokens.device()),
                          layernorm_embedding, dropout_, is_training(), project_in);
  auto token_padding = nn::mask_if_any(tokens.eq(nn::kPadIndex));
  nn::SharedAttention shared;
  auto out = run_decoder_stack(
      x, layers->size(),
      [&](size_t i, const torch::Tensor& h, bool) {
        auto r = layers[i]->as<nn::TransformerDecoderLayer>()->step(h, token_padding, enc.out, enc.padding_mask, state,
                                                                    need_attn && returns_attn(i), shared);
        r.out = step_a2(a2, i, r.out, state, token_padding);
        return r;
      },
      need_attn, layer_norm, output_weight, output_packed, project_out, state.output_rows.get(), output_bias,
      state.log_probs);
  state.steps += n;
  return out;
}

AttentionMaps TransformerModel::attention_maps(const torch::Tensor& src, const torch::Tensor& prev_tokens) {
  AttentionMaps maps;
  auto enc = encoder->forward(src, &maps);
  decoder->forward(prev_tokens, enc, false, &maps);
  return maps;
}

// ---------------------------------------------------------------- presets

namespace {
void set_side(TransformerSideConfig& s, int64_t dim, int64_t ffn, int64_t layers, int64_t heads) {
  s.embed_dim = dim, s.ffn_embed_dim = ffn, s.layers = layers, s.attention_heads = heads;
}
// SAN blocks of the kind Xiao et al. learn: self-attention shared by pairs of adjacent layers,
// encoder-decoder attention by one wide block above the first two layers.
std::string pairs(int64_t layers) {
  std::vector<LayerBlock> b;
  for (int64_t i = 0; i < layers; i += 2) b.emplace_back(i, std::min(i + 1, layers - 1));
  return format_layer_groups(b);
}
std::string wide_upper_block(int64_t layers) {
  if (layers >= 4) return format_layer_groups({{0, 1}, {2, layers - 1}});
  if (layers == 3) return "0,1-2";
  return pairs(layers);
}
void san(TransformerConfig& c) {
  c.encoder.self_attn_groups = pairs(c.encoder.layers);
  c.decoder.self_attn_groups = pairs(c.decoder.layers);
  c.decoder.encoder_attn_groups = wide_upper_block(c.decoder.layers);
}
void aan(TransformerConfig& c) { c.decoder.average_attention = true; }

// <base>_san, <base>_aan and <base>_san_aan.
void add_variants(Registry& reg, const std::string& base) {
  auto base_edit = reg.preset(base).apply;
  auto add = preset_adder<TransformerConfig>(reg, "transformer");
  add(base + "_san", base + " with SAN attention sharing (docs/san.md)", [base_edit](TransformerConfig& c) {
    base_edit(c);
    san(c);
  });
  add(base + "_aan", base + " with an Average Attention Network decoder", [base_edit](TransformerConfig& c) {
    base_edit(c);
    aan(c);
  });
  add(base + "_san_aan", base + " with an AAN decoder and SAN sharing of the other attention",
      [base_edit](TransformerConfig& c) {
        base_edit(c);
        san(c);
        c.decoder.self_attn_groups.clear();
        aan(c);
      });
}

void big(TransformerConfig& c) {
  set_side(c.encoder, 1024, 4096, 6, 16);
  set_side(c.decoder, 1024, 4096, 6, 16);
  c.dropout = 0.3;
}
}  // namespace

void register_transformer(Registry& reg) {
  reg.add_family(encoder_decoder_family<TransformerConfig, TransformerModel>("transformer"));
  auto add = preset_adder<TransformerConfig>(reg, "transformer");
  add("transformer", "fairseq base Transformer", [](TransformerConfig&) {});
  add("transformer_iwslt_de_en", "fairseq IWSLT'14 De-En Transformer", [](TransformerConfig& c) {
    set_side(c.encoder, 512, 1024, 6, 4);
    set_side(c.decoder, 512, 1024, 6, 4);
  });
  add("transformer_wmt_en_de", "fairseq WMT En-De base Transformer", [](TransformerConfig&) {});
  add("transformer_vaswani_wmt_en_de_big", "Vaswani et al. big Transformer", big);
  add("transformer_vaswani_wmt_en_fr_big", "big Transformer, dropout 0.1", [](TransformerConfig& c) {
    big(c);
    c.dropout = 0.1;
  });
  add("transformer_wmt_en_de_big", "big Transformer with attention dropout 0.1", [](TransformerConfig& c) {
    big(c);
    c.attention_dropout = 0.1;
  });
  add("transformer_wmt_en_de_big_t2t", "big pre-norm Transformer (tensor2tensor)", [](TransformerConfig& c) {
    big(c);
    c.encoder.normalize_before = c.decoder.normalize_before = true;
    c.attention_dropout = 0.1;
    c.activation_dropout = 0.1;
  });
  add("transformer_small", "small Transformer for CPU work (3+3 layers, 256 dims, shared embeddings)",
      [](TransformerConfig& c) {
        set_side(c.encoder, 256, 1024, 3, 4);
        set_side(c.decoder, 256, 1024, 3, 4);
        c.dropout = 0.2;
        c.share_all_embeddings = true;
      });
  add("transformer_tiny", "tiny Transformer for tests (2+2 layers, 32 dims)", [](TransformerConfig& c) {
    set_side(c.encoder, 32, 64, 2, 2);
    set_side(c.decoder, 32, 64, 2, 2);
    c.dropout = 0.0;
    c.share_decoder_input_output_embed = true;
  });
  reg.add_family(language_model_family<TransformerLMConfig, TransformerLanguageModel>("transformer_lm"));
  auto add_lm = preset_adder<TransformerLMConfig>(reg, "transformer_lm");
  add_lm("transformer_lm", "fairseq Transformer language model (6 pre-norm layers, 512 dims)", [](TransformerLMConfig&) {});
  add_lm("transformer_lm_big", "fairseq big Transformer language model (12 layers, 1024 dims, 16 heads)",
         [](TransformerLMConfig& c) { set_side(c.decoder, 1024, 4096, 12, 16); });
  add_lm("transformer_lm_gpt", "fairseq GPT-sized Transformer language model (12 layers, 768 dims, gelu)",
         [](TransformerLMConfig& c) {
           set_side(c.decoder, 768, 3072, 12, 12);
           c.attention_dropout = 0.1;
           c.activation_fn = "gelu";
         });
  add_lm("transformer_lm_small", "small Transformer language model for CPU work (4 layers, 256 dims, tied embeddings)",
         [](TransformerLMConfig& c) {
           set_side(c.decoder, 256, 1024, 4, 4);
           c.dropout = 0.2;
           c.share_decoder_input_output_embed = true;
         });
  add_lm("transformer_lm_tiny", "tiny Transformer language model for tests (2 layers, 32 dims)", [](TransformerLMConfig& c) {
    set_side(c.decoder, 32, 64, 2, 2);
    c.dropout = 0.0;
  });
  for (const char* base : {"transformer", "transformer_iwslt_de_en", "transformer_wmt_en_de", "transformer_wmt_en_de_big",
                           "transformer_small", "transformer_tiny"}) {
    add_variants(reg, base);
  }
}

}  // namespace leanseq::models

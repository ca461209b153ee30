#include "leanseq/models/fconv.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/models/registry.h"
#include "leanseq/nn/functional.h"

namespace leanseq::models {

// ---------------------------------------------------------------- layer specs

namespace {
// A recursive-descent reader of fairseq's Python-literal layer specs.
class SpecReader {
 public:
  SpecReader(const std::string& text, const std::string& key) : s_(text), key_(key) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(key_ + ": " + what + " at character " + std::to_string(pos_ + 1) + " of '" + s_ +
                      "' (expected e.g. [(512, 3)] * 9 + [(1024, 3)] * 4)");
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  bool at_end() {
    skip();
    return pos_ == s_.size();
  }
  int64_t integer() {
    skip();
    size_t start = pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (start == pos_) fail("expected a number");
    if (pos_ - start > 9) fail("number too large");
    return std::stoll(s_.substr(start, pos_ - start));
  }
  bool boolean() {
    skip();
    for (const char* word : {"True", "true", "False", "false"}) {
      const std::string w(word);
      if (s_.compare(pos_, w.size(), w) == 0) {
        pos_ += w.size();
        return w[0] == 'T' || w[0] == 't';
      }
    }
    fail("expected True or False");
  }
  // list := '[' item (',' item)* [','] ']' ; term := list ['*' n] | n '*' list ; expr := term ('+' term)*
  template <class T, class Item> std::vector<T> expression(Item item) {
    std::vector<T> out;
    do {
      std::vector<T> part;
      int64_t times = 1;
      skip();
      if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        times = integer();
        expect('*');
        part = list<T>(item);
      } else {
        part = list<T>(item);
        if (accept('*')) times = integer();
      }
      for (int64_t k = 0; k < times; ++k) out.insert(out.end(), part.begin(), part.end());
    } while (accept('+'));
    if (!at_end()) fail("unexpected text");
    return out;
  }

 private:
  template <class T, class Item> std::vector<T> list(Item item) {
    expect('[');
    std::vector<T> out;
    if (accept(']')) return out;
    do {
      if (accept(']')) return out;  // trailing comma
      out.push_back(item());
    } while (accept(','));
    expect(']');
    return out;
  }
  const std::string& s_;
  const std::string& key_;
  size_t pos_ = 0;
};
}  // namespace

std::vector<FConvLayerSpec> parse_fconv_layers(const std::string& text, const std::string& key) {
  SpecReader r(text, key);
  auto specs = r.expression<FConvLayerSpec>([&] {
    r.expect('(');
    FConvLayerSpec s;
    s.channels = r.integer();
    r.expect(',');
    s.kernel_size = r.integer();
    if (!r.accept(',')) {
      r.expect(')');
    } else if (!r.accept(')')) {
      s.residual = r.integer();
      r.accept(',');
      r.expect(')');
    }
    if (s.channels < 1 || s.kernel_size < 1) r.fail("channels and kernel width must be positive");
    return s;
  });
  if (specs.empty()) throw ConfigError(key + ": no layers in '" + text + "'");
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].residual > static_cast<int64_t>(i) + 1) {
      throw ConfigError(key + ": layer " + std::to_string(i + 1) + " takes its residual from " +
                        std::to_string(specs[i].residual) + " layers back, but only " + std::to_string(i + 1) +
                        " outputs precede it");
    }
  }
  return specs;
}

std::vector<bool> parse_fconv_attention(const std::string& text, size_t layers, const std::string& key) {
  SpecReader r(text, key);
  std::string trimmed = text;
  trimmed.erase(0, trimmed.find_first_not_of(" \t"));
  std::vector<bool> out;
  if (!trimmed.empty() && trimmed[0] != '[' && !std::isdigit(static_cast<unsigned char>(trimmed[0]))) {
    bool b = r.boolean();
    if (!r.at_end()) r.fail("unexpected text");
    out.assign(layers, b);
  } else {
    for (char b : r.expression<char>([&] { return static_cast<char>(r.boolean()); })) out.push_back(b != 0);
  }
  if (out.size() != layers) {
    throw ConfigError(key + ": " + std::to_string(out.size()) + " entries for " + std::to_string(layers) +
                      " decoder layers");
  }
  return out;
}

// ---------------------------------------------------------------- config

void FConvConfig::visit(ConfigVisitor& v) {
  v.field("encoder.embed_dim", encoder_embed_dim, "encoder embedding dimension");
  v.field("encoder.layers", encoder_layers, "encoder convolutions, e.g. [(512, 3)] * 20 (channels, width[, residual])");
  v.field("decoder.embed_dim", decoder_embed_dim, "decoder embedding dimension");
  v.field("decoder.layers", decoder_layers, "decoder convolutions, e.g. [(512, 3)] * 20");
  v.field("decoder.out_embed_dim", decoder_out_embed_dim, "dimension before the output layer");
  v.field("decoder.attention", decoder_attention, "attention in every decoder layer (True) or a list per layer");
  v.field("dropout", dropout, "dropout probability", kProbability);
  v.field("share_input_output_embed", share_input_output_embed, "tie the output layer to the decoder embedding");
  encoder_a2.visit(v, "encoder.");
  decoder_a2.visit(v, "decoder.");
  v.field("max_source_positions", max_source_positions, "rows of the source position table", Range::at_least(1));
  v.field("max_target_positions", max_target_positions, "rows of the target position table", Range::at_least(1));
}

std::string FConvConfig::summary() const {
  std::ostringstream os;
  os << "embed " << encoder_embed_dim << "/" << decoder_embed_dim << ", encoder " << encoder_layers << ", decoder "
     << decoder_layers << ", out " << decoder_out_embed_dim << ", dropout " << dropout
     << encoder_a2.describe("encoder ") << decoder_a2.describe("decoder ");
  return os.str();
}

void FConvConfig::validate() const {
  if (encoder_embed_dim <= 0 || decoder_embed_dim <= 0 || decoder_out_embed_dim <= 0) {
    throw ConfigError("model: embedding dimensions must be positive");
  }
  if (dropout < 0 || dropout >= 1) throw ConfigError("model.dropout: expected a probability in [0, 1)");
  auto enc = parse_fconv_layers(encoder_layers, "model.encoder.layers");
  auto dec = parse_fconv_layers(decoder_layers, "model.decoder.layers");
  encoder_a2.validate(static_cast<int64_t>(enc.size()), "encoder.", "ConvS2S's layers");
  decoder_a2.validate(static_cast<int64_t>(dec.size()), "decoder.", "ConvS2S's layers");
  auto attn = parse_fconv_attention(decoder_attention, dec.size(), "model.decoder.attention");
  if (std::find(attn.begin(), attn.end(), true) == attn.end()) {
    throw ConfigError("model.decoder.attention: at least one decoder layer needs attention (the decoder sees the "
                      "source only through it)");
  }
  if (share_input_output_embed && decoder_out_embed_dim != decoder_embed_dim) {
    throw ConfigError("model.share_input_output_embed needs decoder.out_embed_dim == decoder.embed_dim (" +
                      std::to_string(decoder_out_embed_dim) + " vs " + std::to_string(decoder_embed_dim) + ")");
  }
  if (max_source_positions <= nn::kPadIndex + 1 || max_target_positions <= nn::kPadIndex + 1) {
    throw ConfigError("model: max_source_positions and max_target_positions must exceed " +
                      std::to_string(nn::kPadIndex + 1));
  }
}

// ---------------------------------------------------------------- shared pieces

namespace {
const double kSqrtHalf = std::sqrt(0.5);

// fconv's embeddings: N(0, 0.1), pad row zero. The position table has `rows` rows in all (fairseq's
// LearnedPositionalEmbedding(max_positions)), so positions up to rows - pad - 1.
torch::nn::Embedding fconv_embedding(int64_t num, int64_t dim) {
  torch::nn::Embedding e(torch::nn::EmbeddingOptions(num, dim).padding_idx(nn::kPadIndex));
  torch::NoGradGuard g;
  e->weight.normal_(0, 0.1);
  e->weight[nn::kPadIndex].zero_();
  return e;
}
nn::PositionalEmbedding fconv_positions(int64_t rows, int64_t dim) {
  nn::PositionalEmbedding p(dim, nn::kPadIndex, rows - nn::kPadIndex - 1, true);
  torch::NoGradGuard g;
  p->weight.normal_(0, 0.1);
  p->weight[nn::kPadIndex].zero_();
  return p;
}

// Registers the residual projections of a stack: layer i takes its residual from the output
// `residual` layers back, projected when its width differs. fairseq keeps one list entry per layer
// (None where there is no projection), so the names follow the layer index: projections.<i>.*.
// Returns one handle per layer, empty where there is no projection.
std::vector<nn::WeightNormLinear> add_projections(torch::nn::Module& owner, const std::vector<FConvLayerSpec>& specs) {
  auto dict = owner.register_module("projections", torch::nn::ModuleDict());
  std::vector<nn::WeightNormLinear> out(specs.size(), nn::WeightNormLinear(nullptr));
  std::vector<int64_t> widths{specs.front().channels};
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& s = specs[i];
    int64_t residual_dim = s.residual == 0 ? s.channels : widths[widths.size() - static_cast<size_t>(s.residual)];
    if (residual_dim != s.channels) {
      out[i] = nn::WeightNormLinear(residual_dim, s.channels);
      dict->update({{std::to_string(i), out[i].ptr()}});
    }
    widths.push_back(s.channels);
  }
  return out;
}

// Registers the convolution of every layer (convolutions.<i>.*) and returns their handles.
std::vector<nn::ConvTBC> add_convolutions(torch::nn::Module& owner, const std::vector<FConvLayerSpec>& specs,
                                          double dropout) {
  auto list = owner.register_module("convolutions", torch::nn::ModuleList());
  std::vector<nn::ConvTBC> out;
  int64_t in = specs.front().channels;
  for (const auto& s : specs) {
    out.emplace_back(in, 2 * s.channels, s.kernel_size, dropout);
    list->push_back(out.back());
    in = s.channels;
  }
  return out;
}

// The A2 blocks after the listed layers of a stack, each as wide as its layer's output.
std::vector<nn::DoubleAttention> add_a2(torch::nn::Module& owner, const A2Blocks& a2,
                                        const std::vector<FConvLayerSpec>& specs, bool causal, double dropout) {
  std::vector<int64_t> widths;
  for (const auto& s : specs) widths.push_back(s.channels);
  return a2.make(owner, widths, causal, dropout, nn::BlockNorm::none);
}

// The residual of layer i: the output `residual` layers back, projected when needed.
torch::Tensor residual_input(const std::vector<torch::Tensor>& outputs, const FConvLayerSpec& s,
                             nn::WeightNormLinear& projection) {
  if (s.residual == 0) return torch::Tensor();
  const auto& r = outputs[outputs.size() - static_cast<size_t>(s.residual)];
  return projection ? projection(r) : r;
}
}  // namespace

// ---------------------------------------------------------------- encoder

FConvEncoderImpl::FConvEncoderImpl(const FConvConfig& cfg, int64_t vocab)
    : specs_(parse_fconv_layers(cfg.encoder_layers, "model.encoder.layers")), dropout_(cfg.dropout) {
  const int64_t E = cfg.encoder_embed_dim;
  embed_tokens = register_module("embed_tokens", fconv_embedding(vocab, E));
  embed_positions = register_module("embed_positions", fconv_positions(cfg.max_source_positions, E));
  fc1 = register_module("fc1", nn::WeightNormLinear(E, specs_.front().channels, cfg.dropout));
  projections = add_projections(*this, specs_);
  convolutions = add_convolutions(*this, specs_, cfg.dropout);
  a2 = add_a2(*this, cfg.encoder_a2, specs_, false, cfg.dropout);
  fc2 = register_module("fc2", nn::WeightNormLinear(specs_.back().channels, E));
}

EncoderOut FConvEncoderImpl::forward(const torch::Tensor& src) {
  auto padding_mask = src.eq(nn::kPadIndex);  // [B, S]
  const bool any_pad = padding_mask.any().item<bool>();
  auto embedded = nn::maybe_dropout(embed_tokens(src) + embed_positions(src), dropout_, is_training());
  auto x = fc1(embedded).transpose(0, 1);  // [S, B, C]: time-major through the convolutions
  auto pad_tbc = any_pad ? padding_mask.t().unsqueeze(-1) : torch::Tensor();
  std::vector<torch::Tensor> outputs{x};
  for (size_t i = 0; i < specs_.size(); ++i) {
    const auto& s = specs_[i];
    auto residual = residual_input(outputs, s, projections[i]);
    if (any_pad) x = x.masked_fill(pad_tbc, 0.0);
    x = nn::maybe_dropout(x, dropout_, is_training());
    x = convolutions[i]->forward(x, (s.kernel_size - 1) / 2, s.kernel_size / 2);
    x = torch::glu(x, 2);
    if (residual.defined()) x = (x + residual) * kSqrtHalf;
    if (a2[i]) x = a2[i]->forward(x.transpose(0, 1), any_pad ? padding_mask : torch::Tensor()).transpose(0, 1);
    outputs.push_back(x);
  }
  x = fc2(x.transpose(0, 1));
  if (any_pad) x = x.masked_fill(padding_mask.unsqueeze(-1), 0.0);
  x = nn::grad_multiply(x, 1.0 / (2.0 * static_cast<double>(num_attention_layers)));
  return {x, padding_mask, (x + embedded) * kSqrtHalf};
}

// ---------------------------------------------------------------- decoder

FConvDecoderImpl::FConvDecoderImpl(const FConvConfig& cfg, int64_t vocab)
    : specs_(parse_fconv_layers(cfg.decoder_layers, "model.decoder.layers")), dropout_(cfg.dropout) {
  const int64_t E = cfg.decoder_embed_dim;
  auto with_attention = parse_fconv_attention(cfg.decoder_attention, specs_.size(), "model.decoder.attention");
  embed_tokens = register_module("embed_tokens", fconv_embedding(vocab, E));
  embed_positions = register_module("embed_positions", fconv_positions(cfg.max_target_positions, E));
  fc1 = register_module("fc1", nn::WeightNormLinear(E, specs_.front().channels, cfg.dropout));
  projections = add_projections(*this, specs_);
  convolutions = add_convolutions(*this, specs_, cfg.dropout);
  auto dict = register_module("attention", torch::nn::ModuleDict());
  attention.assign(specs_.size(), nn::FConvAttention(nullptr));
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!with_attention[i]) continue;
    attention[i] = nn::FConvAttention(specs_[i].channels, E);
    dict->update({{std::to_string(i), attention[i].ptr()}});
  }
  a2 = add_a2(*this, cfg.decoder_a2, specs_, true, cfg.dropout);
  fc2 = register_module("fc2", nn::WeightNormLinear(specs_.back().channels, cfg.decoder_out_embed_dim));
  if (cfg.share_input_output_embed) {
    tied_fc3 = register_module("fc3", nn::TiedLinear(embed_tokens->weight));
  } else {
    fc3 = register_module("fc3", nn::WeightNormLinear(cfg.decoder_out_embed_dim, vocab, cfg.dropout));
  }
}

int64_t FConvDecoderImpl::num_attention_layers() const {
  return std::count_if(attention.begin(), attention.end(), [](const nn::FConvAttention& a) { return !a.is_empty(); });
}

DecoderOut FConvDecoderImpl::run(const torch::Tensor& embedded, const EncoderOut& enc, bool need_attn,
                                 const LayerFn& conv, const LayerFn& global, nn::OutputRows* rows) {
  auto x = fc1(embedded);
  std::vector<torch::Tensor> outputs{x};
  DecoderOut out;
  const double n_attn = static_cast<double>(num_attention_layers());
  for (size_t i = 0; i < specs_.size(); ++i) {
    auto residual = residual_input(outputs, specs_[i], projections[i]);
    x = torch::glu(conv(i, nn::maybe_dropout(x, dropout_, is_training())), -1);
    if (attention[i]) {
      auto r = attention[i]->forward(x, embedded, enc.out, enc.values, enc.padding_mask);
      x = r.out;
      if (need_attn) out.attn = out.attn.defined() ? out.attn + r.attn / n_attn : r.attn / n_attn;
    }
    if (residual.defined()) x = (x + residual) * kSqrtHalf;
    if (a2[i]) x = global(i, x);
    outputs.push_back(x);
  }
  x = nn::maybe_dropout(fc2(x), dropout_, is_training());
  if (!rows) {
    out.logits = fc3 ? fc3(x) : tied_fc3(x);
  } else if (fc3) {  // the weight-normalised rows, computed for the first step only
    out.logits = nn::output_logits(x, rows->gathered ? torch::Tensor() : fc3->weight(), fc3->bias, fc3->packed(), rows);
  } else {
    out.logits = nn::output_logits(x, tied_fc3->weight, tied_fc3->bias, tied_fc3->packed(), rows);
  }
  return out;
}

DecoderOut FConvDecoderImpl::forward(const torch::Tensor& prev_tokens, const EncoderOut& enc, bool need_attn) {
  auto embedded = nn::maybe_dropout(embed_tokens(prev_tokens) + embed_positions(prev_tokens), dropout_, is_training());
  const auto padding = has_a2() ? nn::mask_if_any(prev_tokens.eq(nn::kPadIndex)) : torch::Tensor();
  return run(
      embedded, enc, need_attn,
      [&](size_t i, const torch::Tensor& x) {
        // Causal: K - 1 zeros before the sequence (fairseq pads both sides and drops the last K - 1).
        auto& c = *convolutions[i];
        return c.forward(x.transpose(0, 1), c.kernel_size() - 1, 0).transpose(0, 1);
      },
      [&](size_t i, const torch::Tensor& x) { return a2[i]->forward(x, padding); });
}

DecoderOut FConvDecoderImpl::step(const torch::Tensor& tokens, const EncoderOut& enc, nn::IncrementalState& state,
                                  bool need_attn) {
  const int64_t B = tokens.size(0), n = tokens.size(1);
  auto embedded = nn::maybe_dropout(embed_tokens(tokens) + embed_positions->at_steps(state.steps, n, B, tokens.device()), dropout_,
                                    is_training());
  const auto padding = has_a2() ? nn::mask_if_any(tokens.eq(nn::kPadIndex)) : torch::Tensor();
  auto out = run(
      embedded, enc, need_attn,
      [&](size_t i, const torch::Tensor& x) { return convolutions[i]->step(x, state.get<nn::ConvWindowCache>(nn::state_name("convolutions", i))); },
      [&](size_t i, const torch::Tensor& x) {
        return a2[i]->step(x, state.get<nn::DoubleAttentionCache>(a2_state_name(i)), padding);
      },
      state.output_rows.get());
  state.steps += n;
  return out;
}

// ---------------------------------------------------------------- model

FConvModel::FConvModel(const FConvConfig& cfg, int64_t src_vocab, int64_t tgt_vocab) : cfg_(cfg) {
  cfg.validate();
  encoder = register_module("encoder", FConvEncoder(cfg, src_vocab));
  decoder = register_module("decoder", FConvDecoder(cfg, tgt_vocab));
  encoder->num_attention_layers = decoder->num_attention_layers();
}

// ---------------------------------------------------------------- presets

void register_fconv(Registry& reg) {
  reg.add_family({"fconv", [] { return std::make_shared<FConvConfig>(); },
                  [](const ModelConfig& c, const VocabInfo& v) -> std::shared_ptr<Seq2SeqModel> {
                    return std::make_shared<FConvModel>(static_cast<const FConvConfig&>(c), v.src_size, v.tgt_size);
                  }});
  auto add = preset_adder<FConvConfig>(reg, "fconv");
  auto both = [](FConvConfig& c, int64_t dim, const std::string& layers, int64_t out) {
    c.encoder_embed_dim = c.decoder_embed_dim = dim;
    c.encoder_layers = c.decoder_layers = layers;
    c.decoder_out_embed_dim = out;
  };
  add("fconv", "fairseq base ConvS2S: 512 dims, 20 + 20 layers of (512, 3)", [](FConvConfig&) {});
  auto iwslt = [](FConvConfig& c) {
    c.encoder_embed_dim = c.decoder_embed_dim = c.decoder_out_embed_dim = 256;
    c.encoder_layers = "[(256, 3)] * 4";
    c.decoder_layers = "[(256, 3)] * 3";
  };
  add("fconv_iwslt_de_en", "fairseq IWSLT'14 De-En ConvS2S: 256 dims, 4 + 3 layers of (256, 3)", iwslt);
  add("fconv_wmt_en_ro", "fairseq WMT'16 En-Ro ConvS2S: the base model with a 512-dim output",
      [](FConvConfig& c) { c.decoder_out_embed_dim = 512; });
  add("fconv_wmt_en_de", "fairseq WMT'14 En-De ConvS2S: 768 dims, 9 x (512, 3) + 4 x (1024, 3) + 2 x (2048, 1)",
      [both](FConvConfig& c) { both(c, 768, "[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2", 512); });
  add("fconv_wmt_en_fr", "fairseq WMT'14 En-Fr ConvS2S: 768 dims, 15 layers from (512, 3) to (4096, 1)",
      [both](FConvConfig& c) {
        both(c, 768, "[(512, 3)] * 6 + [(768, 3)] * 4 + [(1024, 3)] * 3 + [(2048, 1)] * 1 + [(4096, 1)] * 1", 512);
      });
  add("fconv_small", "ConvS2S for CPU work: fconv_iwslt_de_en with its recipe's dropout 0.2", [iwslt](FConvConfig& c) {
    iwslt(c);
    c.dropout = 0.2;
  });
  add("fconv_tiny", "tiny ConvS2S for tests", [](FConvConfig& c) {
    c.encoder_embed_dim = c.decoder_embed_dim = c.decoder_out_embed_dim = 32;
    c.encoder_layers = "[(32, 3)] * 2 + [(48, 5)]";
    c.decoder_layers = "[(32, 3), (48, 2)] + [(32, 3, 2)]";
    c.dropout = 0.0;
  });
}

}  // namespace leanseq::models

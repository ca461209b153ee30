#include "leanseq/interop/ctranslate2.h"

#include <sys/stat.h>

#include <cmath>
#include <set>
#include <sstream>

#include "leanseq/checkpoint/run_config.h"
#include "leanseq/core/error.h"
#include "leanseq/core/zip.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/text/moses_bpe.h"

namespace leanseq::interop {

namespace {

using json = nlohmann::json;

// CTranslate2's activation codes (include/ctranslate2/ops/activation.h) and leanseq's names.
const char* activation_name(int64_t code) {
  static const char* names[] = {"relu", "gelu_tanh", "swish", "gelu", "gelu_sigmoid", "tanh", "sigmoid"};
  return code >= 0 && code < 7 ? names[code] : "unknown";
}

// CTranslate2's sinusoidal encodings (layers/common.cc): position p = 1, 2, ... as
// [sin(p f) | cos(p f)], f_i = exp(-i ln(10000) / (depth/2 - 1)).
torch::Tensor ct2_sinusoidal(int64_t rows, int64_t depth) {
  const int64_t half = depth / 2;
  const float step = std::log(10000.f) / static_cast<float>(half - 1);
  auto timescales = torch::exp(torch::arange(half, torch::kFloat) * -step);
  auto scaled = (torch::arange(rows, torch::kFloat) + 1).unsqueeze(1) * timescales.unsqueeze(0);
  return torch::cat({torch::sin(scaled), torch::cos(scaled)}, 1);
}

class Converter {
 public:
  explicit Converter(const Ct2Model& m) : m_(m) {}
  Ct2Conversion run();

 private:
  [[noreturn]] void refuse(const std::string& what) const {
    throw CheckpointError(m_.dir() + ": " + what + " (leanseq does not build it)");
  }
  // An attribute of `scope`, or (spec revisions before 5) of the model as a whole.
  int64_t attribute(const std::string& scope, const std::string& name, int64_t fallback) const {
    if (m_.has(scope + "/" + name)) return m_.integer(scope + "/" + name, fallback);
    return m_.spec_revision() < 5 ? m_.integer(name, fallback) : fallback;
  }
  int64_t count_layers(const std::string& scope) const {
    int64_t n = 0;
    while (m_.has(scope + "/layer_" + std::to_string(n) + "/self_attention/linear_0/weight")) ++n;
    if (n == 0) throw CheckpointError(m_.dir() + ": model.bin has no " + scope + " layers (" + scope + "/layer_0/...)");
    return n;
  }
  void refuse_variants(const std::string& layer) const;
  void norm(const std::string& from, const std::string& to);
  void linear(const std::string& from, const std::string& to);
  void attention(const std::string& from, const std::string& to, bool self, int64_t dim);
  bool embeddings_scaled(const std::string& side, int64_t dim) const;
  torch::Tensor positions(const std::string& side, int64_t dim) const;
  void side(const std::string& side, int64_t& dim, int64_t& ffn, int64_t& layers, int64_t& heads, bool& pre_norm);
  void vocabularies(int64_t src_rows, int64_t tgt_rows);

  const Ct2Model& m_;
  Ct2Conversion out_;
  std::map<std::string, torch::Tensor>& t_ = out_.tensors;
};

void Converter::refuse_variants(const std::string& layer) const {
  const std::pair<const char*, const char*> variants[] = {
      {"/self_attention/relative_position_keys", "relative position representations"},
      {"/self_attention/relative_attention_bias", "relative attention bias (T5)"},
      {"/self_attention/rotary_dim", "rotary position embeddings"},
      {"/self_attention/num_heads_kv", "multi-query or grouped-query attention"},
      {"/self_attention/q_norm/gamma", "query and key normalization"},
      {"/ffn/linear_0_noact/weight", "a gated feed-forward layer (GLU)"},
      {"/input_layer_norm/gamma", "layer norms before and after each sublayer"},
      {"/shared_layer_norm/gamma", "parallel residual blocks"},
      {"/self_attention/linear_0/weight_zero", "AWQ quantization"},
  };
  for (const auto& [suffix, what] : variants) {
    if (m_.has(layer + suffix)) refuse(layer + suffix + ": " + what);
  }
}

void Converter::norm(const std::string& from, const std::string& to) {
  if (!m_.has(from + "/beta")) refuse(from + ": RMS normalization (a layer norm without beta)");
  t_[to + ".weight"] = m_.float32(from + "/gamma");
  t_[to + ".bias"] = m_.float32(from + "/beta");
}

void Converter::linear(const std::string& from, const std::string& to) {
  auto w = m_.float32(from + "/weight");
  t_[to + ".weight"] = w;
  t_[to + ".bias"] = m_.has(from + "/bias") ? m_.float32(from + "/bias") : torch::zeros({w.size(0)});
}

// CTranslate2 fuses the projections: self-attention's linear_0 is [q; k; v], encoder attention's
// linear_0 is q and linear_1 is [k; v]; the last linear is the output projection.
void Converter::attention(const std::string& from, const std::string& to, bool self, int64_t dim) {
  const std::string fused = from + (self ? "/linear_0" : "/linear_1");
  const auto w = m_.float32(fused + "/weight");
  const int64_t parts = self ? 3 : 2;
  if (w.dim() != 2 || w.size(0) != parts * dim) {
    throw CheckpointError(m_.dir() + ": " + fused + "/weight has shape " + c10::str(w.sizes()) + ", not [" +
                          std::to_string(parts * dim) + ", ...]");
  }
  const auto b = m_.has(fused + "/bias") ? m_.float32(fused + "/bias") : torch::zeros({parts * dim});
  const auto ws = w.chunk(parts, 0), bs = b.chunk(parts, 0);
  const char* names[] = {"q_proj", "k_proj", "v_proj"};
  for (int64_t i = 0; i < parts; ++i) {
    const std::string name = to + "." + names[self ? i : i + 1];
    t_[name + ".weight"] = ws[i].contiguous();
    t_[name + ".bias"] = bs[i].contiguous();
  }
  if (!self) linear(from + "/linear_0", to + ".q_proj");
  linear(from + (self ? "/linear_1" : "/linear_2"), to + ".out_proj");
}

bool Converter::embeddings_scaled(const std::string& side, int64_t dim) const {
  // A flag (int8) or the scale itself; older files name it embeddings/multiply_by_sqrt_depth.
  std::string name = side + "/scale_embeddings";
  if (!m_.has(name)) name = side + "/embeddings/multiply_by_sqrt_depth";
  if (!m_.has(name)) name = side + "/embeddings_0/multiply_by_sqrt_depth";
  if (!m_.has(name)) return true;
  if (m_.stored_type(name) == Ct2Type::int8) return m_.integer(name, 1) != 0;
  const double scale = m_.real(name, 1);
  if (scale == 1) return false;
  if (std::abs(scale - std::sqrt(static_cast<double>(dim))) < 1e-4 * scale) return true;
  refuse(name + " = " + std::to_string(scale) + ": an embedding scale other than 1 or sqrt(" + std::to_string(dim) + ")");
}

// The learned position table leanseq's transformer takes: row 2 + t (fairseq's padding offset)
// holds the encoding of position t.
torch::Tensor Converter::positions(const std::string& side, int64_t dim) const {
  const std::string name = side + "/position_encodings/encodings";
  auto encodings = m_.has(name) ? m_.float32(name) : ct2_sinusoidal(1024, dim);
  if (encodings.dim() != 2 || encodings.size(1) != dim || encodings.size(0) < 1) {
    throw CheckpointError(m_.dir() + ": " + name + " has shape " + c10::str(encodings.sizes()) + ", not [positions, " +
                          std::to_string(dim) + "]");
  }
  return torch::cat({torch::zeros({2, dim}), encodings}, 0);
}

void Converter::side(const std::string& s, int64_t& dim, int64_t& ffn, int64_t& layers, int64_t& heads, bool& pre_norm) {
  const std::string to = s == "encoder" ? "encoder" : "decoder";
  if (m_.has(s + "/embeddings_1/weight")) refuse(s + "/embeddings_1: several source embeddings (source factors)");
  if (m_.has(s + "/alibi")) {
    if (m_.integer(s + "/alibi", 0)) refuse(s + "/alibi: ALiBi attention biases");
  }
  for (const char* what : {"/project_in/weight", "/scale_outputs", "/sliding_window"}) {
    if (m_.has(s + what)) refuse(s + what);
  }
  if (m_.integer(s + "/start_from_zero_embedding", 0)) refuse(s + "/start_from_zero_embedding");
  // The encoder's embeddings are a list (embeddings_0) since source factors; older files have one.
  const std::string embeddings = m_.has(s + "/embeddings_0/weight") ? s + "/embeddings_0" : s + "/embeddings";
  const auto embed = m_.float32(embeddings + "/weight");
  if (embed.dim() != 2) throw CheckpointError(m_.dir() + ": " + embeddings + "/weight is not a matrix");
  dim = embed.size(1);
  layers = count_layers(s);
  // Revisions before 3 named the head count by the spec (TransformerBase: 8, TransformerBig: 16).
  heads = attribute(s, "num_heads", m_.spec() == "TransformerBig" ? 16 : 8);
  pre_norm = attribute(s, "pre_norm", 1) != 0;
  const int64_t act = attribute(s, "activation", 0);
  if (act < 0 || act > 3) refuse(s + "/activation = " + std::string(activation_name(act)));
  if (heads <= 0 || dim % heads != 0) {
    throw CheckpointError(m_.dir() + ": " + s + " has " + std::to_string(heads) + " heads for width " + std::to_string(dim));
  }
  // leanseq's names of relu, gelu_tanh, swish and gelu.
  static const char* leanseq_names[] = {"relu", "gelu_accurate", "swish", "gelu"};
  out_.values.set("model.activation_fn", leanseq_names[act], m_.dir());
  t_[to + ".embed_tokens.weight"] = embed;
  t_[to + ".embed_positions.weight"] = positions(s, dim);
  if (m_.has(s + "/layernorm_embedding/gamma")) norm(s + "/layernorm_embedding", to + ".layernorm_embedding");
  if (pre_norm) {
    if (!m_.has(s + "/layer_norm/gamma")) refuse(s + ": a pre-norm stack without its final layer norm");
    norm(s + "/layer_norm", to + ".layer_norm");
  }
  const int64_t encoder_dim = s == "decoder" ? t_.at("encoder.embed_tokens.weight").size(1) : dim;
  for (int64_t i = 0; i < layers; ++i) {
    const std::string from = s + "/layer_" + std::to_string(i), l = to + ".layers." + std::to_string(i);
    refuse_variants(from);
    attention(from + "/self_attention", l + ".self_attn", true, dim);
    norm(from + "/self_attention/layer_norm", l + ".self_attn_layer_norm");
    if (s == "decoder") {
      if (!m_.has(from + "/attention/linear_0/weight")) refuse(from + ": a decoder without encoder attention");
      attention(from + "/attention", l + ".encoder_attn", false, dim);
      // k and v read the encoder's output: their inputs are the encoder's width.
      if (t_.at(l + ".encoder_attn.k_proj.weight").size(1) != encoder_dim) {
        throw CheckpointError(m_.dir() + ": " + from + "/attention/linear_1 does not read the encoder's width");
      }
      norm(from + "/attention/layer_norm", l + ".encoder_attn_layer_norm");
    }
    linear(from + "/ffn/linear_0", l + ".fc1");
    linear(from + "/ffn/linear_1", l + ".fc2");
    norm(from + "/ffn/layer_norm", l + ".final_layer_norm");
  }
  ffn = t_.at(to + ".layers.0.fc1.weight").size(0);
}


// A vocabulary in fairseq's order: <s> <pad> </s> <unk> (CTranslate2's bos, its <pad> or
// OpenNMT's <blank>, eos and unk tokens), then the others in the file's order. from[i] is the
// file's row for leanseq's row i (-1: the file has no such token).
struct Ordered {
  std::string dict_text;
  std::vector<int64_t> from;
};

Ordered fairseq_order(const std::vector<std::string>& vocab, const std::string& bos, const std::string& eos,
                      const std::string& unk, const std::string& origin) {
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < vocab.size(); ++i) {
    auto [it, fresh] = index.emplace(vocab[i], static_cast<int64_t>(i));
    if (!fresh) {
      throw CheckpointError(origin + ": token '" + vocab[i].substr(0, 100) + "' appears twice (entries " +
                            std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
  }
  auto find = [&](const std::string& t) -> int64_t {
    auto it = index.find(t);
    return it == index.end() ? -1 : it->second;
  };
  Ordered o;
  o.from = {find(bos), find("<pad>") >= 0 ? find("<pad>") : find("<blank>"), find(eos), find(unk)};
  const std::set<int64_t> specials(o.from.begin(), o.from.end());
  const std::set<std::string> reserved = {"<s>", "<pad>", "</s>", "<unk>"};
  std::ostringstream text;
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (specials.count(static_cast<int64_t>(i))) continue;
    const std::string& t = vocab[i];
    if (t.empty() || t.find_first_of(" \t\n\r\v\f") != std::string::npos) {
      throw CheckpointError(origin + ": entry " + std::to_string(i) + " ('" + t.substr(0, 100) +
                            "') is empty or holds whitespace; leanseq's dictionaries hold one token per line");
    }
    if (reserved.count(t)) {
      throw CheckpointError(origin + ": entry " + std::to_string(i) + " is '" + t +
                            "', which the model's config does not name as its special token");
    }
    text << t << " 1\n";
    o.from.push_back(static_cast<int64_t>(i));
  }
  o.dict_text = text.str();
  return o;
}

// Rows of `m` in leanseq's order; a missing row is `fill`.
torch::Tensor reorder(const torch::Tensor& m, const std::vector<int64_t>& from, double fill = 0) {
  auto sizes = m.sizes().vec();
  sizes[0] = static_cast<int64_t>(from.size());
  auto out = torch::full(sizes, fill, m.options());
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] >= 0) out[static_cast<int64_t>(i)] = m[from[i]];
  }
  return out;
}

void Converter::vocabularies(int64_t src_rows, int64_t tgt_rows) {
  const auto& cfg = m_.config();
  auto token = [&](const char* key, const char* fallback) -> std::string {
    if (!cfg.contains(key)) return fallback;
    if (!cfg[key].is_string()) {
      throw CheckpointError(m_.dir() + "/config.json: " + key + " is " +
                            (cfg[key].is_null() ? std::string("null (the caller gives it with each request)")
                                                : "not a string") +
                            "; leanseq reads a model whose config names it");
    }
    return cfg[key].get<std::string>();
  };
  const std::string bos = token("bos_token", "<s>"), eos = token("eos_token", "</s>"), unk = token("unk_token", "<unk>");
  auto flag = [&](const char* key) { return cfg.contains(key) && cfg[key].is_boolean() && cfg[key].get<bool>(); };
  std::string start = token("decoder_start_token", "<s>");
  bool source_bos = flag("add_source_bos"), source_eos = flag("add_source_eos");
  if (m_.binary_version() < 6) {
    // Before config.json, flags in model.bin said how sequences are framed.
    if (m_.integer("user_decoder_start_tokens", 0)) refuse("user_decoder_start_tokens (a start token per request)");
    start = m_.integer("with_target_bos", 1) ? bos : eos;
    source_bos = m_.integer("with_source_bos", 0) != 0;
    source_eos = m_.integer("with_source_eos", 0) != 0;
  }
  // CTranslate2 appends the unknown token to a vocabulary without it (OpenNMT-tf's files).
  auto with_unk = [&](std::vector<std::string> v) {
    if (std::find(v.begin(), v.end(), unk) == v.end()) v.push_back(unk);
    return v;
  };
  const auto src_vocab = with_unk(m_.source_vocabulary());
  const auto tgt_vocab = with_unk(m_.target_vocabulary());
  auto check_size = [&](const std::vector<std::string>& v, int64_t rows, const char* side) {
    if (static_cast<int64_t>(v.size()) != rows) {
      throw CheckpointError(m_.dir() + ": the " + std::string(side) + " vocabulary has " + std::to_string(v.size()) +
                            " tokens but its embeddings " + std::to_string(rows) + " rows");
    }
  };
  check_size(src_vocab, src_rows, "source");
  check_size(tgt_vocab, tgt_rows, "target");
  const auto src = fairseq_order(src_vocab, bos, eos, unk, m_.dir() + " (source vocabulary)");
  const auto tgt = fairseq_order(tgt_vocab, bos, eos, unk, m_.dir() + " (target vocabulary)");
  if (tgt.from[2] < 0) throw CheckpointError(m_.dir() + ": the target vocabulary has no end token '" + eos + "'");
  int64_t start_row = -1;
  for (size_t i = 0; i < tgt_vocab.size(); ++i) {
    if (tgt_vocab[i] == start) start_row = static_cast<int64_t>(i);
  }
  if (start_row < 0) throw CheckpointError(m_.dir() + ": the target vocabulary has no decoder start token '" + start + "'");
  out_.vocab.source_bos = source_bos;
  out_.vocab.source_eos = source_eos;
  out_.vocab.max_len_cuts = true;  // searched as CTranslate2 searches
  if ((out_.vocab.source_bos && src.from[0] < 0) || (out_.vocab.source_eos && src.from[2] < 0)) {
    throw CheckpointError(m_.dir() + ": the config adds a token to sources that the source vocabulary lacks");
  }
  out_.vocab.src_dict = src.dict_text;
  out_.vocab.tgt_dict = tgt.dict_text;
  out_.vocab.joint = src.dict_text == tgt.dict_text;

  auto& enc = t_.at("encoder.embed_tokens.weight");
  enc = reorder(enc, src.from);
  auto& dec = t_.at("decoder.embed_tokens.weight");
  const auto start_embedding = dec[start_row].clone();
  dec = reorder(dec, tgt.from);
  dec[data::Dictionary::kEos] = start_embedding;  // leanseq's decoding starts with </s>
  auto& proj = t_.at("decoder.output_projection.weight");
  proj = reorder(proj, tgt.from);
  // A token the file lacks must never be chosen: its logit is pushed far down.
  const bool missing = std::find(tgt.from.begin(), tgt.from.end(), -1) != tgt.from.end();
  if (missing && !t_.count("decoder.output_projection.bias")) t_["decoder.output_projection.bias"] = torch::zeros({tgt_rows});
  if (auto it = t_.find("decoder.output_projection.bias"); it != t_.end()) it->second = reorder(it->second, tgt.from, -1e9);
}

Ct2Conversion Converter::run() {
  const std::string& spec = m_.spec();
  if (!spec.empty() && spec != "TransformerSpec" && spec != "TransformerBase" && spec != "TransformerBig") {
    refuse("model spec '" + spec + "': leanseq reads CTranslate2's sequence-to-sequence TransformerSpec");
  }
  if (m_.spec_revision() > 7) refuse("spec revision " + std::to_string(m_.spec_revision()) + " (newer than 7)");
  const auto& cfg = m_.config();
  if (cfg.contains("quantization_type") && cfg["quantization_type"] != 0) refuse("config.json quantization_type (AWQ)");
  if (cfg.contains("layer_norm_epsilon") && !cfg["layer_norm_epsilon"].is_null() &&
      (!cfg["layer_norm_epsilon"].is_number() || std::abs(cfg["layer_norm_epsilon"].get<double>() - 1e-5) > 1e-12)) {
    refuse("config.json layer_norm_epsilon " + cfg["layer_norm_epsilon"].dump() + " (leanseq's layer norms use 1e-5)");
  }
  if (cfg.value("multi_query_attention", false)) refuse("config.json multi_query_attention");
  int64_t dims[2], ffns[2], layers[2], heads[2];
  bool pre[2];
  side("encoder", dims[0], ffns[0], layers[0], heads[0], pre[0]);
  const std::string activation = out_.values.values.at("model.activation_fn");
  side("decoder", dims[1], ffns[1], layers[1], heads[1], pre[1]);
  if (activation != out_.values.values.at("model.activation_fn")) refuse("an encoder and a decoder of different activations");
  const bool scaled = embeddings_scaled("encoder", dims[0]);
  if (scaled != embeddings_scaled("decoder", dims[1])) refuse("embeddings scaled on one side only");
  const bool ln_embedding = t_.count("encoder.layernorm_embedding.weight") > 0;
  if (ln_embedding != (t_.count("decoder.layernorm_embedding.weight") > 0)) refuse("layernorm_embedding on one side only");
  const auto proj = m_.float32("decoder/projection/weight");
  if (proj.dim() != 2 || proj.size(1) != dims[1]) {
    throw CheckpointError(m_.dir() + ": decoder/projection/weight has shape " + c10::str(proj.sizes()) +
                          ", not [vocabulary, " + std::to_string(dims[1]) + "]");
  }
  t_["decoder.output_projection.weight"] = proj;
  if (m_.has("decoder/projection/bias")) t_["decoder.output_projection.bias"] = m_.float32("decoder/projection/bias");
  vocabularies(t_.at("encoder.embed_tokens.weight").size(0), proj.size(0));

  auto& v = out_.values;
  const std::string from = m_.dir();
  v.set("arch", "transformer", from);
  const char* names[] = {"encoder", "decoder"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = std::string("model.") + names[i] + ".";
    v.set(p + "embed_dim", std::to_string(dims[i]), from);
    v.set(p + "ffn_embed_dim", std::to_string(ffns[i]), from);
    v.set(p + "layers", std::to_string(layers[i]), from);
    v.set(p + "attention_heads", std::to_string(heads[i]), from);
    v.set(p + "normalize_before", pre[i] ? "true" : "false", from);
    v.set(p + "learned_pos", "true", from);
  }
  v.set("model.max_source_positions", std::to_string(t_.at("encoder.embed_positions.weight").size(0) - 2), from);
  v.set("model.max_target_positions", std::to_string(t_.at("decoder.embed_positions.weight").size(0) - 2), from);
  v.set("model.no_scale_embedding", scaled ? "false" : "true", from);
  v.set("model.layernorm_embedding", ln_embedding ? "true" : "false", from);
  v.set("model.share_all_embeddings", "false", from);
  v.set("model.share_decoder_input_output_embed", "false", from);
  v.set("model.decoder.output_bias", t_.count("decoder.output_projection.bias") ? "true" : "false", from);
  v.set("model.dropout", "0", from);
  // Alignments (--print-alignment) as CTranslate2 returns attention: the first heads of one layer.
  const int64_t alignment_layer = attribute("decoder", "alignment_layer", -1);
  const int64_t alignment_heads = attribute("decoder", "alignment_heads", 1);
  // (out of range: refused by the config's validation, as an invalid model of this file)
  v.set("model.decoder.alignment_layer", std::to_string(alignment_layer), from);
  v.set("model.decoder.alignment_heads", std::to_string(alignment_heads), from);

  // The type of the weights, as the first layer's first linear stores them (position tables,
  // norms and biases may be wider).
  const auto type = m_.stored_type("encoder/layer_0/self_attention/linear_0/weight");
  out_.storage_name = ct2_type_name(type);
  out_.storage = type == Ct2Type::int8       ? kernels::ComputeType::int8
                 : type == Ct2Type::float16  ? kernels::ComputeType::float16
                 : type == Ct2Type::bfloat16 ? kernels::ComputeType::bfloat16
                                             : kernels::ComputeType::float32;
  return std::move(out_);
}

}  // namespace

Ct2Conversion convert_ctranslate2(const Ct2Model& model) { return Converter(model).run(); }

}  // namespace leanseq::interop

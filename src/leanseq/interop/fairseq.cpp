#include "leanseq/interop/fairseq.h"

#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/run_config.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/strings.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/interop/torch_file.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/text/bpe.h"
#include "leanseq/text/moses_bpe.h"

namespace leanseq::interop {

namespace {

using json = nlohmann::json;

json to_json(const PyRef& v) {
  using K = PyValue::Kind;
  switch (v->kind) {
    case K::none: return nullptr;
    case K::boolean: return v->b;
    case K::integer: return v->i;
    case K::real: return v->f;
    case K::str: return v->s;
    case K::list:
    case K::tuple: {
      json a = json::array();
      for (const auto& x : v->items) a.push_back(to_json(x));
      return a;
    }
    case K::dict:
    case K::ns: {
      json o = json::object();
      for (const auto& [k, x] : v->entries) {
        if (k->kind == K::str) o[k->s] = to_json(x);
      }
      return o;
    }
    default: return v->describe();
  }
}

// One fairseq option that shapes the network: its leanseq key, and its value when the options
// predate it (fairseq's base_architecture default; a string naming another option means "the
// same as that one").
struct Field {
  const char* fairseq;
  const char* leanseq;
  json fallback;
};

// An option leanseq does not build, refused unless it has the value that leaves the network as
// leanseq builds it; `training_only`: one that changes training alone (a decoded model is the same
// network whatever its value), refused for fairseq-train only.
struct Refusal {
  const char* fairseq;
  std::function<bool(const json& value, const json& args)> supported;
  bool training_only = false;
};

bool is_false(const json& v, const json&) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); }
bool is_none(const json& v, const json&) {
  return v.is_null() || (v.is_string() && (v.get<std::string>().empty() || v.get<std::string>() == "None"));
}
bool is_zero(const json& v, const json&) { return v.is_null() || (v.is_number() && v.get<double>() == 0); }
std::function<bool(const json&, const json&)> equals_option(const char* other) {
  return [other](const json& v, const json& args) {
    return v.is_null() || !args.contains(other) || args[other].is_null() || v == args[other];
  };
}

struct Family {
  const char* name;  // the leanseq preset that sets the family's defaults
  std::vector<Field> fields;
  std::vector<Refusal> refusals;
};

const Family& transformer_family() {
  static const Family f{
      "transformer",
      {{"encoder_embed_dim", "model.encoder.embed_dim", 512},
       {"encoder_ffn_embed_dim", "model.encoder.ffn_embed_dim", 2048},
       {"encoder_layers", "model.encoder.layers", 6},
       {"encoder_attention_heads", "model.encoder.attention_heads", 8},
       {"encoder_normalize_before", "model.encoder.normalize_before", false},
       {"encoder_learned_pos", "model.encoder.learned_pos", false},
       {"decoder_embed_dim", "model.decoder.embed_dim", "encoder_embed_dim"},
       {"decoder_ffn_embed_dim", "model.decoder.ffn_embed_dim", "encoder_ffn_embed_dim"},
       {"decoder_layers", "model.decoder.layers", 6},
       {"decoder_attention_heads", "model.decoder.attention_heads", 8},
       {"decoder_normalize_before", "model.decoder.normalize_before", false},
       {"decoder_learned_pos", "model.decoder.learned_pos", false},
       {"activation_fn", "model.activation_fn", "relu"},
       {"dropout", "model.dropout", 0.1},
       {"attention_dropout", "model.attention_dropout", 0.0},
       {"activation_dropout", "model.activation_dropout", 0.0},
       {"share_decoder_input_output_embed", "model.share_decoder_input_output_embed", false},
       {"share_all_embeddings", "model.share_all_embeddings", false},
       {"no_scale_embedding", "model.no_scale_embedding", false},
       {"layernorm_embedding", "model.layernorm_embedding", false},
       {"decoder_output_dim", "model.decoder.output_dim", "decoder_embed_dim"},
       {"max_source_positions", "model.max_source_positions", 1024},
       {"max_target_positions", "model.max_target_positions", 1024}},
      {{"activation_fn", [](const json& v, const json&) { return v.is_null() || v == "relu" || v == "gelu"; }},
       {"adaptive_softmax_cutoff", is_none},
       {"adaptive_input", is_false},
       {"tie_adaptive_weights", is_false},
       {"no_token_positional_embeddings", is_false},
       {"cross_self_attention", is_false},
       {"no_cross_attention", is_false},
       {"no_decoder_final_norm", is_false},
       {"encoder_layers_to_keep", is_none},
       {"decoder_layers_to_keep", is_none},
       // fairseq 0.12 sizes the decoder's embeddings by decoder_embed_dim whatever this says.
       {"decoder_input_dim", [](const json&, const json&) { return true; }},
       {"quant_noise_pq", is_zero, true},  // quantization noise: off at inference
       {"quant_noise_scalar", is_zero, true},
       {"merge_src_tgt_embed", is_false},
       {"char_inputs", is_false},
       {"scale_attn", is_false},
       {"scale_fc", is_false},
       {"scale_heads", is_false},
       {"scale_resids", is_false},
       {"alignment_layer", is_none},
       {"full_context_alignment", is_false}}};
  return f;
}

const Family& lightconv_family() {
  static const Family f{
      "lightconv",
      {{"encoder_embed_dim", "model.encoder.embed_dim", 512},
       {"encoder_conv_dim", "model.encoder.conv_dim", "encoder_embed_dim"},
       {"encoder_ffn_embed_dim", "model.encoder.ffn_embed_dim", 2048},
       {"encoder_layers", "model.encoder.layers", 7},
       {"encoder_attention_heads", "model.encoder.attention_heads", 8},
       {"encoder_normalize_before", "model.encoder.normalize_before", false},
       {"encoder_learned_pos", "model.encoder.learned_pos", false},
       {"encoder_glu", "model.encoder.glu", true},
       {"encoder_conv_type", "model.encoder.conv_type", "dynamic"},
       {"encoder_kernel_size_list", "model.encoder.kernel_size_list", json::array({3, 7, 15, 31, 31, 31, 31})},
       {"decoder_embed_dim", "model.decoder.embed_dim", "encoder_embed_dim"},
       {"decoder_conv_dim", "model.decoder.conv_dim", "decoder_embed_dim"},
       {"decoder_ffn_embed_dim", "model.decoder.ffn_embed_dim", "encoder_ffn_embed_dim"},
       {"decoder_layers", "model.decoder.layers", 6},
       {"decoder_attention_heads", "model.decoder.attention_heads", "encoder_attention_heads"},
       {"decoder_normalize_before", "model.decoder.normalize_before", false},
       {"decoder_learned_pos", "model.decoder.learned_pos", false},
       {"decoder_glu", "model.decoder.glu", true},
       {"decoder_conv_type", "model.decoder.conv_type", "encoder_conv_type"},
       {"decoder_kernel_size_list", "model.decoder.kernel_size_list", json::array({3, 7, 15, 31, 31, 31})},
       {"weight_softmax", "model.weight_softmax", true},
       {"dropout", "model.dropout", 0.1},
       {"attention_dropout", "model.attention_dropout", 0.0},
       {"relu_dropout", "model.relu_dropout", 0.0},
       {"input_dropout", "model.input_dropout", 0.1},
       {"weight_dropout", "model.weight_dropout", 0.0},
       {"share_decoder_input_output_embed", "model.share_decoder_input_output_embed", false},
       {"share_all_embeddings", "model.share_all_embeddings", false},
       {"max_source_positions", "model.max_source_positions", 1024},
       {"max_target_positions", "model.max_target_positions", 1024}},
      {{"adaptive_softmax_cutoff", is_none},
       {"no_token_positional_embeddings", is_false},
       {"decoder_output_dim", equals_option("decoder_embed_dim")},
       {"decoder_input_dim", equals_option("decoder_embed_dim")}}};
  return f;
}

const Family& fconv_family() {
  static const Family f{"fconv",
                        {{"encoder_embed_dim", "model.encoder.embed_dim", 512},
                         {"encoder_layers", "model.encoder.layers", "[(512, 3)] * 20"},
                         {"decoder_embed_dim", "model.decoder.embed_dim", 512},
                         {"decoder_layers", "model.decoder.layers", "[(512, 3)] * 20"},
                         {"decoder_out_embed_dim", "model.decoder.out_embed_dim", 256},
                         {"decoder_attention", "model.decoder.attention", "True"},
                         {"dropout", "model.dropout", 0.1},
                         {"share_input_output_embed", "model.share_input_output_embed", false},
                         {"max_source_positions", "model.max_source_positions", 1024},
                         {"max_target_positions", "model.max_target_positions", 1024}},
                        {}};
  return f;
}

// The family of a fairseq arch name, or nullptr.
// transformer_align, transformer_wmt_en_de_big_align: a transformer trained with an alignment loss.
bool is_alignment_arch(const std::string& arch) {
  return arch.rfind("transformer", 0) == 0 && arch.size() > 6 && arch.compare(arch.size() - 6, 6, "_align") == 0;
}

// The family leanseq builds for a fairseq arch (nullptr: none; transformer_align's is for import only).
const Family* family_of(const std::string& arch) {
  auto starts = [&](const char* p) { return arch.rfind(p, 0) == 0; };
  if (starts("transformer_lm") || is_alignment_arch(arch) || arch.find("xlm") != std::string::npos) return nullptr;
  if (arch == "transformer" || starts("transformer_")) return &transformer_family();
  if (starts("lightconv_lm")) return nullptr;
  if (arch == "lightconv" || starts("lightconv_")) return &lightconv_family();
  if (starts("fconv_self_att") || starts("fconv_lm")) return nullptr;
  if (arch == "fconv" || starts("fconv_")) return &fconv_family();
  return nullptr;
}

std::string as_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) return shortest_text(v.get<double>());
  if (v.is_array()) {  // kernel size lists: "3,7,15"
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + as_text(x);
    return s;
  }
  return v.dump();
}

// A value as fairseq's option parser would have it: "True"/"False" strings as booleans (lightconv's
// --encoder-glu takes a string), lists written as text as lists.
json normalised(const json& v) {
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "True") return true;
    if (s == "False") return false;
    if (s.size() > 1 && s.front() == '[' && s.back() == ']' && s.find('(') == std::string::npos) {
      try {
        return json::parse(s);
      } catch (const json::exception&) {
      }
    }
  }
  return v;
}

std::string lang_from(const PyRef& root, const json& args, const char* key) {
  if (args.contains(key) && args[key].is_string()) return args[key];
  if (auto cfg = root->get("cfg")) {
    if (auto task = cfg->get("task")) {
      if (auto v = task->get(key); v && v->kind == PyValue::Kind::str) return v->s;
    }
  }
  return "";
}

// dict.txt text padded as fairseq pads a dictionary when it builds the model's embedding:
// madeupword0000, ... up to `rows` entries (the four specials included).
std::string padded_dictionary(const std::string& text, int64_t rows, const std::string& path) {
  const auto dict = data::Dictionary::parse(text, path);
  const int64_t have = dict.size();
  if (rows < have || rows - have >= 8) {
    throw CheckpointError(path + ": " + std::to_string(have) + " symbols (with the 4 specials), but the checkpoint's embedding has " +
                          std::to_string(rows) + " rows: not the dictionary this model was trained with");
  }
  std::string out = text;
  if (!out.empty() && out.back() != '\n') out += '\n';
  for (int64_t i = 0; i < rows - have; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "madeupword%04ld 0\n", static_cast<long>(i));
    out += buf;
  }
  return out;
}

}  // namespace

json fairseq_model_args(const PyRef& root, const std::string& origin) {
  if (!root || !root->is_mapping()) throw CheckpointError(origin + ": the pickled object is not a dict of model, args/cfg");
  if (auto args = root->get("args"); args && args->kind == PyValue::Kind::ns) return to_json(args);
  if (auto cfg = root->get("cfg"); cfg && cfg->is_mapping()) {
    if (auto model = cfg->get("model"); model && model->is_mapping()) return to_json(model);
  }
  throw CheckpointError(origin + ": neither 'args' nor 'cfg.model' holds the model's options: not a fairseq checkpoint");
}

std::vector<std::pair<std::string, bool>> fairseq_model_options(const std::string& arch) {
  const Family* family = family_of(arch);
  if (!family) throw ConfigError("fairseq arch '" + arch + "': leanseq trains the transformer, lightconv and fconv families");
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& f : family->fields) out.emplace_back(f.fairseq, f.fallback.is_boolean());
  for (const auto& r : family->refusals) {
    bool known = false;
    for (const auto& o : out) known = known || o.first == r.fairseq;
    if (!known) out.emplace_back(r.fairseq, false);
  }
  return out;
}

ConfigValues fairseq_config_values(const json& raw_args, const std::string& origin, bool training) {
  json args = json::object();
  for (auto it = raw_args.begin(); it != raw_args.end(); ++it) args[it.key()] = normalised(it.value());
  // fairseq's build_model shares the decoder's output projection whenever all embeddings are shared.
  if (args.contains("share_all_embeddings") && args["share_all_embeddings"] == true) {
    args["share_decoder_input_output_embed"] = true;
  }
  std::string arch;
  if (args.contains("arch") && args["arch"].is_string()) arch = args["arch"];
  if (arch.empty() && args.contains("_name") && args["_name"].is_string()) arch = args["_name"];
  if (arch.empty()) throw CheckpointError(origin + ": the model options name no arch");
  const Family* family = family_of(arch);
  // transformer_align translates as the transformer does; its alignment options only choose which
  // attention fairseq prints as A lines (leanseq prints its own: the last layer's, heads averaged).
  if (is_alignment_arch(arch)) {
    family = &transformer_family();
    for (const char* k : {"alignment_layer", "alignment_heads", "full_context_alignment"}) args.erase(k);
  }
  if (!family) {
    throw CheckpointError(origin + ": fairseq arch '" + arch +
                          "' is not supported (import takes the transformer, transformer_align, lightconv and fconv "
                          "translation models)");
  }
  std::function<json(const Field&)> value_of = [&](const Field& f) -> json {
    if (args.contains(f.fairseq) && !args[f.fairseq].is_null()) return args[f.fairseq];
    if (f.fallback.is_string()) {  // another option's value, when that is an option of this family
      const std::string other = f.fallback.get<std::string>();
      for (const auto& g : family->fields) {
        if (other == g.fairseq) return value_of(g);
      }
    }
    return f.fallback;
  };
  // A refusal compares with the values the network gets, defaults included.
  json effective = args;
  for (const auto& f : family->fields) effective[f.fairseq] = value_of(f);
  for (const auto& r : family->refusals) {
    if (r.training_only && !training) continue;
    if (args.contains(r.fairseq) && !r.supported(args[r.fairseq], effective)) {
      throw CheckpointError(origin + ": fairseq option " + r.fairseq + "=" + as_text(args[r.fairseq]) +
                            (r.training_only ? " changes training in a way leanseq does not train"
                                             : " changes the network in a way leanseq does not build"));
    }
  }
  ConfigValues values;
  const std::string from = origin + " (fairseq options)";
  values.set("arch", family->name, from);
  for (const auto& f : family->fields) values.set(f.leanseq, as_text(normalised(value_of(f))), from);
  return values;
}

std::map<std::string, torch::Tensor> fairseq_state_dict(std::map<std::string, torch::Tensor> tensors,
                                                        const std::string& family, bool tied_output) {
  std::map<std::string, torch::Tensor> out;
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  // fairseq 0.12's encoder layers also save fused copies of their weights for PyTorch's
  // BetterTransformer path (<layer>.in_proj_weight, out_proj_*, fc1_*, fc2_*); the layer's own
  // modules hold the same values.
  auto fused_copy = [&](const std::string& name) {
    for (const char* part : {".in_proj_", ".out_proj_", ".fc1_", ".fc2_"}) {
      const auto at = name.rfind(part);
      if (at == std::string::npos || name.find('.', at + 1) != std::string::npos) continue;
      const std::string layer = name.substr(0, at);
      return tensors.count(layer + ".self_attn.q_proj.weight") > 0 && tensors.count(layer + ".fc1.weight") > 0;
    }
    return false;
  };
  // Layer norms under a list's names: fairseq's lightconv layers (layer_norms.0/1 are leanseq's
  // layer_norm1/2), and the Transformer's encoder layers before fairseq 0.7.
  const auto norms = family == "lightconv"
                         ? std::vector<std::pair<std::string, std::string>>{{".layer_norms.0.", ".layer_norm1."},
                                                                            {".layer_norms.1.", ".layer_norm2."}}
                         : std::vector<std::pair<std::string, std::string>>{{".layer_norms.0.", ".self_attn_layer_norm."},
                                                                            {".layer_norms.1.", ".final_layer_norm."}};
  for (auto& [name, t] : tensors) {
    // Buffers fairseq keeps beside the weights, and the conv bias DynamicConv registers but the
    // lightconv model never uses.
    if (ends_with(name, ".version") || name == "version" || ends_with(name, "._float_tensor") ||
        ends_with(name, "conv.conv_bias") || fused_copy(name)) {
      continue;
    }
    auto value = t.is_floating_point() && t.scalar_type() != torch::kFloat ? t.to(torch::kFloat) : t;
    // Attention projections fused as in_proj (fairseq before 0.9): q, k and v in that order.
    bool split = false;
    for (const char* part : {"weight", "bias"}) {
      const std::string fused = std::string(".in_proj_") + part;
      if (!ends_with(name, fused)) continue;
      const std::string prefix = name.substr(0, name.size() - fused.size());
      auto qkv = value.chunk(3, 0);
      out[prefix + ".q_proj." + part] = qkv[0];
      out[prefix + ".k_proj." + part] = qkv[1];
      out[prefix + ".v_proj." + part] = qkv[2];
      split = true;
    }
    if (split) continue;
    std::string renamed = name;
    for (const auto& [from, to] : norms) {
      if (auto at = renamed.find(from); at != std::string::npos) renamed.replace(at, from.size(), to);
    }
    out[renamed] = value;
  }
  // The output projection: older fairseq (and its lightconv decoder to this day) keeps it as
  // decoder.embed_out, or not at all when it is the decoder's input embedding.
  if (family != "fconv" && !out.count("decoder.output_projection.weight")) {
    if (auto it = out.find("decoder.embed_out"); it != out.end()) {
      out["decoder.output_projection.weight"] = it->second;
      out.erase(it);
    } else if (auto emb = out.find("decoder.embed_tokens.weight"); tied_output && emb != out.end()) {
      out["decoder.output_projection.weight"] = emb->second;
    }
  }
  return out;
}

FairseqImportResult import_fairseq(const FairseqImportOptions& opt) {
  const std::string& path = opt.checkpoint;
  if (!std::filesystem::exists(path)) throw DataError(path + ": checkpoint not found");
  TorchFile file(path);
  const auto& root = file.root();
  const json args = fairseq_model_args(root, path);
  auto values = fairseq_config_values(args, path);
  checkpoint::RunConfig cfg = [&] {
    try {
      return checkpoint::resolve_run_config(values);
    } catch (const ConfigError& e) {
      throw CheckpointError(path + ": the fairseq options give an invalid leanseq model: " + e.what());
    }
  }();
  FairseqImportResult result;
  result.fairseq_arch = args.value("arch", args.value("_name", std::string()));
  result.leanseq_arch = cfg.arch;
  result.source_lang = opt.source_lang.empty() ? lang_from(root, args, "source_lang") : opt.source_lang;
  result.target_lang = opt.target_lang.empty() ? lang_from(root, args, "target_lang") : opt.target_lang;
  if (result.source_lang.empty() || result.target_lang.empty()) {
    // As fairseq infers them: from binarized files named <split>.<src>-<tgt>.<lang>.bin.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(opt.data_dir, ec)) {
      const std::string n = e.path().filename().string();
      const auto a = n.find('.'), b = n.find('.', a + 1), dash = n.find('-', a + 1);
      if (a != std::string::npos && b != std::string::npos && dash != std::string::npos && dash < b) {
        result.source_lang = n.substr(a + 1, dash - a - 1);
        result.target_lang = n.substr(dash + 1, b - dash - 1);
        break;
      }
    }
  }
  if (result.source_lang.empty() || result.target_lang.empty()) {
    throw ConfigError(path + ": the checkpoint does not name its languages and " + opt.data_dir +
                      " has no <split>.<src>-<tgt> files; give --source-lang and --target-lang");
  }

  // The weights.
  auto model_entry = root->get("model");
  if (!model_entry || model_entry->kind != PyValue::Kind::dict) throw CheckpointError(path + ": no 'model' state dict");
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& [k, v] : model_entry->entries) {
    if (k->kind != PyValue::Kind::str || v->kind != PyValue::Kind::tensor) {
      throw CheckpointError(path + ": the state dict holds " + v->describe() + " under " + k->describe());
    }
    tensors[k->s] = file.tensor(*v->tensor);
  }
  const bool tied = values.values["model.share_decoder_input_output_embed"] == "true" ||
                    values.values["model.share_all_embeddings"] == "true";
  tensors = fairseq_state_dict(std::move(tensors), cfg.model->family(), tied);
  auto rows = [&](const char* name) -> int64_t {
    auto it = tensors.find(name);
    if (it == tensors.end() || it->second.dim() != 2) throw CheckpointError(path + ": no " + std::string(name) + " matrix");
    return it->second.size(0);
  };

  // The dictionaries, padded as the embeddings were sized.
  checkpoint::VocabFiles vocab;
  vocab.src_lang = result.source_lang;
  vocab.tgt_lang = result.target_lang;
  const std::string src_path = opt.data_dir + "/dict." + result.source_lang + ".txt";
  const std::string tgt_path = opt.data_dir + "/dict." + result.target_lang + ".txt";
  vocab.src_dict = padded_dictionary(io::read_file(src_path, "source dictionary"), rows("encoder.embed_tokens.weight"), src_path);
  vocab.tgt_dict = padded_dictionary(io::read_file(tgt_path, "target dictionary"), rows("decoder.embed_tokens.weight"), tgt_path);
  vocab.joint = vocab.src_dict == vocab.tgt_dict;
  if (opt.spm.empty() == opt.tokenizer.empty()) {
    throw ConfigError("import-fairseq: give the model's text pipeline: --spm MODEL, or --tokenizer moses|none "
                      "[--bpe-codes CODES]");
  }
  if (!opt.bpe_codes.empty() && opt.tokenizer.empty()) throw ConfigError("import-fairseq: --bpe-codes goes with --tokenizer");
  if (!opt.spm.empty()) {
    vocab.src_spm = vocab.tgt_spm = io::read_file(opt.spm, "SentencePiece model");
  } else {
    vocab.tokenizer = text::parse_tokenizer_spec(opt.tokenizer, "import-fairseq --tokenizer").text();
    if (!opt.bpe_codes.empty()) {
      vocab.bpe_codes = io::read_file(opt.bpe_codes, "BPE codes");
      text::Bpe::from_text(vocab.bpe_codes, opt.bpe_codes);  // a malformed file is refused now, not at translation
    }
  }
  result.src_vocab = data::Dictionary::parse(vocab.src_dict, src_path).size();
  result.tgt_vocab = data::Dictionary::parse(vocab.tgt_dict, tgt_path).size();

  // The leanseq model takes every tensor, and no other.
  auto model = models::build_model(*cfg.model, {result.src_vocab, result.tgt_vocab, vocab.joint});
  models::load_named_tensors(*model, tensors, true, path);
  result.parameters = models::count_parameters(*model);
  checkpoint::save_checkpoint(opt.out, checkpoint::dump_run_config(cfg), vocab, checkpoint::TrainerProgress{}, *model, nullptr);
  return result;
}

}  // namespace leanseq::interop

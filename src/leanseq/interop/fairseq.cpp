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
#include "leanseq/interop/fairseq_families.h"
#include "leanseq/interop/torch_file.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/text/bpe.h"
#include "leanseq/text/moses_bpe.h"

namespace leanseq::interop {

namespace {


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

namespace {
// Where a fairseq checkpoint keeps the options of `section` ("model", "task", "criterion"): the
// flat args Namespace (every section's options) before fairseq 0.10, cfg.<section> since; null
// when neither is there.
PyRef section_options(const PyRef& root, const std::string& section) {
  if (!root || !root->is_mapping()) return nullptr;
  if (auto args = root->get("args"); args && args->kind == PyValue::Kind::ns) return args;
  if (auto cfg = root->get("cfg"); cfg && cfg->is_mapping()) {
    if (auto part = cfg->get(section); part && part->is_mapping()) return part;
  }
  return nullptr;
}
}  // namespace

json fairseq_model_args(const PyRef& root, const std::string& origin) {
  if (!root || !root->is_mapping()) throw CheckpointError(origin + ": the pickled object is not a dict of model, args/cfg");
  if (auto model = section_options(root, "model")) return to_json(model);
  throw CheckpointError(origin + ": neither 'args' nor 'cfg.model' holds the model's options: not a fairseq checkpoint");
}

json fairseq_section_args(const PyRef& root, const std::string& section) {
  const auto options = section_options(root, section);
  return options ? to_json(options) : json::object();
}

std::vector<std::pair<std::string, bool>> fairseq_model_options(const std::string& arch) {
  const Family* family = fairseq_family(arch);
  if (!family) throw ConfigError("fairseq arch '" + arch + "': leanseq trains the transformer, lightconv and fconv families");
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& f : family->fields) {
    if (*f.leanseq) out.emplace_back(f.fairseq, f.fallback.is_boolean());  // "": not an option of the model
  }
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
  const Family* family = fairseq_family(arch);
  // transformer_align translates as the transformer does; its alignment options only choose which
  // attention fairseq prints as A lines (leanseq prints its own: the last layer's, heads averaged).
  if (is_alignment_arch(arch)) {
    family = &fairseq_transformer_family();
    for (const char* k : {"alignment_layer", "alignment_heads", "full_context_alignment"}) args.erase(k);
  }
  if (!family) {
    throw CheckpointError(origin + ": fairseq arch '" + arch +
                          "' is not supported (import takes the transformer, transformer_align, lightconv and fconv "
                          "translation models and the transformer_lm and lightconv_lm language models)");
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
  for (const auto& f : family->fields) {
    if (*f.leanseq) values.set(f.leanseq, as_text(normalised(value_of(f))), from);  // "": read by other fields only
  }
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
  const auto norms = family.rfind("lightconv", 0) == 0
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
  const bool lm = cfg.model->language_model();
  result.source_lang = opt.source_lang.empty() ? lang_from(root, args, "source_lang") : opt.source_lang;
  result.target_lang = opt.target_lang.empty() ? lang_from(root, args, "target_lang") : opt.target_lang;
  if (lm) {  // one dictionary, dict.txt, and no language: the one given, else "lm"
    result.target_lang = !opt.target_lang.empty() ? opt.target_lang : !opt.source_lang.empty() ? opt.source_lang : "lm";
    result.source_lang = result.target_lang;
  }
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
  const std::string src_path = opt.data_dir + (lm ? "/dict.txt" : "/dict." + result.source_lang + ".txt");
  const std::string tgt_path = opt.data_dir + (lm ? "/dict.txt" : "/dict." + result.target_lang + ".txt");
  if (!lm) {
    vocab.src_dict =
        padded_dictionary(io::read_file(src_path, "source dictionary"), rows("encoder.embed_tokens.weight"), src_path);
  }
  vocab.tgt_dict = padded_dictionary(io::read_file(tgt_path, lm ? "dictionary" : "target dictionary"),
                                     rows("decoder.embed_tokens.weight"), tgt_path);
  if (lm) vocab.src_dict = vocab.tgt_dict;
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

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "leanseq/checkpoint/model.h"
#include "leanseq/core/error.h"
#include "leanseq/core/zip.h"
#include "leanseq/interop/ctranslate2.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/text/moses_bpe.h"
#include "leanseq/text/bpe.h"

namespace leanseq::interop {

namespace {

constexpr uint64_t kMaxPackageBytes = uint64_t{8} << 30;  // what a package may unpack to

bool directory_exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_package_dir(const std::string& path) {
  return directory_exists(path) && io::file_exists(path + "/metadata.json") && directory_exists(path + "/model");
}

// Unpacks an .argosmodel into `into` and returns the package's directory there. Records are
// written under their own names only when those stay inside `into` (no absolute paths, no ..);
// the stanza/ folder (sentence splitting, which leanseq does not use) is left out.
// The folder of an .argosmodel's records that holds its metadata.json ("" or "name/").
std::string package_root(zip::Reader& zip, const std::string& path) {
  std::string root;
  bool found = false;
  for (const auto& [name, r] : zip.records()) {
    if ((name == "metadata.json" || ends_with(name, "/metadata.json")) && (!found || name.size() < root.size() + 13)) {
      root = name.substr(0, name.size() - 13);
      found = true;
    }
  }
  if (!found) throw CheckpointError(path + ": no metadata.json (not an Argos Translate package)");
  return root;
}

std::string unpack_package(const std::string& path, const std::string& into) {
  zip::Reader zip(path);
  const std::string root = package_root(zip, path);
  uint64_t total = 0;
  for (const auto& [name, r] : zip.records()) {
    if (name.compare(0, root.size(), root) != 0 || ends_with(name, "/")) continue;
    const std::string rel = name.substr(root.size());
    if (rel.compare(0, 7, "stanza/") == 0) continue;
    if (rel.empty() || rel[0] == '/' || ("/" + rel + "/").find("/../") != std::string::npos) {
      throw CheckpointError(path + ": record '" + name + "' would be written outside the package");
    }
    total += r.unpacked_size;
    if (total > kMaxPackageBytes) throw CheckpointError(path + ": the package unpacks to more than 8 GiB");
    const std::string out = into + "/" + rel;
    io::make_dirs(out.substr(0, out.rfind('/')));
    io::FileWriter writer(out);
    zip.extract(name, [&](const char* data, uint64_t n) { writer.write(data, n); });
    writer.close();
  }
  return into;
}

std::string json_string(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

constexpr uint64_t kMaxMetadataBytes = uint64_t{1} << 20;

// A package's languages: its metadata.json's from_code and to_code (`where` names the file).
std::pair<std::string, std::string> metadata_languages(const std::string& text, const std::string& where) {
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(where + ": not JSON: " + std::string(e.what()).substr(0, 200));
  }
  if (!meta.is_object()) throw CheckpointError(where + ": not a JSON object");
  auto languages = std::make_pair(json_string(meta, "from_code"), json_string(meta, "to_code"));
  if (languages.first.empty() || languages.second.empty()) {
    throw CheckpointError(where + ": from_code and to_code (the package's languages) are missing");
  }
  return languages;
}

bool is_zipped_package(const std::string& path) { return ends_with(path, ".argosmodel") && !directory_exists(path); }

}  // namespace

bool is_ctranslate2_model(const std::string& path) {
  return is_ctranslate2_dir(path) || is_package_dir(path) || is_zipped_package(path);
}

std::pair<std::string, std::string> ctranslate2_languages(const std::string& path) {
  if (is_package_dir(path)) {
    const std::string meta_path = path + "/metadata.json";
    return metadata_languages(io::read_file(meta_path, "Argos Translate metadata", kMaxMetadataBytes), meta_path);
  }
  if (is_zipped_package(path)) {
    try {
      zip::Reader zip(path);
      const std::string name = package_root(zip, path) + "metadata.json";
      if (zip.records().at(name).unpacked_size > kMaxMetadataBytes) {
        throw CheckpointError(path + ": its metadata.json is larger than 1 MiB");
      }
      std::string text;
      zip.extract(name, [&](const char* data, uint64_t n) { text.append(data, n); });
      return metadata_languages(text, path + " (" + name + ")");
    } catch (const zip::ZipError& e) {
      throw CheckpointError(path + ": not a readable Argos Translate package: " + e.what());
    }
  }
  return {"src", "tgt"};
}

std::vector<std::string> find_argos_packages(const std::string& dir) {
  if (!directory_exists(dir)) throw ConfigError(dir + ": not a directory of Argos Translate packages");
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string path = e.path().string();
    if (is_package_dir(path) || is_zipped_package(path)) found.push_back(path);
  }
  if (ec) throw ConfigError(dir + ": cannot list it: " + ec.message());
  std::sort(found.begin(), found.end());
  return found;
}

Ct2Source locate_ctranslate2(const std::string& path, const io::PrivateDirectory* scratch) {
  Ct2Source src;
  std::string package;
  if (is_zipped_package(path)) {
    if (!io::file_exists(path)) throw CheckpointError(path + ": not found");
    if (!scratch) throw CheckpointError(path + ": a zipped package needs a directory to unpack into");
    try {
      package = unpack_package(path, scratch->path());
    } catch (const zip::ZipError& e) {
      throw CheckpointError(path + ": not a readable Argos Translate package: " + e.what());
    }
  } else if (is_package_dir(path)) {
    package = path;
  }
  if (package.empty()) {
    if (!is_ctranslate2_dir(path)) {
      throw CheckpointError(path + ": not a CTranslate2 model directory (model.bin with config.json or its "
                            "vocabularies) nor an Argos Translate package (.argosmodel, or metadata.json and model/)");
    }
    src.model_dir = path;
    if (io::file_exists(path + "/sentencepiece.model")) src.spm = path + "/sentencepiece.model";
    return src;
  }
  const std::string meta_path = package + "/metadata.json";
  std::tie(src.source_lang, src.target_lang) =
      metadata_languages(io::read_file(meta_path, "Argos Translate metadata", kMaxMetadataBytes), meta_path);
  src.model_dir = package + "/model";
  if (io::file_exists(package + "/sentencepiece.model")) src.spm = package + "/sentencepiece.model";
  return src;
}

checkpoint::Checkpoint ctranslate2_checkpoint(const Ct2ImportOptions& opt, Ct2ImportResult* result) {
  io::PrivateDirectory scratch("leanseq-package");
  const auto src = locate_ctranslate2(opt.model, &scratch);
  const Ct2Model model(src.model_dir);
  auto conv = convert_ctranslate2(model);
  auto& vocab = conv.vocab;
  vocab.src_lang = !opt.source_lang.empty() ? opt.source_lang : !src.source_lang.empty() ? src.source_lang : "src";
  vocab.tgt_lang = !opt.target_lang.empty() ? opt.target_lang : !src.target_lang.empty() ? src.target_lang : "tgt";
  if (!opt.spm.empty() && !opt.tokenizer.empty()) throw ConfigError("give --spm or --tokenizer, not both");
  if (!opt.bpe_codes.empty() && opt.tokenizer.empty()) throw ConfigError("--bpe-codes goes with --tokenizer");
  std::string pipeline;
  if (!opt.tokenizer.empty()) {
    vocab.tokenizer = text::parse_tokenizer_spec(opt.tokenizer, "--tokenizer").text();
    pipeline = "tokenizer " + vocab.tokenizer;
    if (!opt.bpe_codes.empty()) {
      vocab.bpe_codes = io::read_file(opt.bpe_codes, "BPE codes");
      text::Bpe::from_text(vocab.bpe_codes, opt.bpe_codes);
      pipeline += " + BPE";
    }
  } else if (const std::string spm = opt.spm.empty() ? src.spm : opt.spm; !spm.empty()) {
    vocab.src_spm = vocab.tgt_spm = io::read_file(spm, "SentencePiece model");
    pipeline = "SentencePiece (" + std::string(opt.spm.empty() ? "the package's" : "--spm") + ")";
  } else {
    vocab.tokenizer = text::parse_tokenizer_spec("none", "CTranslate2 import").text();
    pipeline = "none (input given as the model's tokens)";
  }
  checkpoint::RunConfig cfg = [&] {
    try {
      return checkpoint::resolve_run_config(conv.values);
    } catch (const ConfigError& e) {
      throw CheckpointError(opt.model + ": the CTranslate2 model gives an invalid leanseq model: " + e.what());
    }
  }();
  checkpoint::Checkpoint ck;
  ck.config_yaml = checkpoint::dump_run_config(cfg);
  ck.vocab = vocab;
  ck.model_tensors = std::move(conv.tensors);
  ck.storage = conv.storage;
  if (result) {
    result->spec = model.spec().empty() ? "TransformerSpec" : model.spec();
    result->binary_version = model.binary_version();
    result->spec_revision = model.spec_revision();
    result->storage = conv.storage_name;
    result->source_lang = vocab.src_lang;
    result->target_lang = vocab.tgt_lang;
    result->text_pipeline = pipeline;
  }
  return ck;
}

Ct2ImportResult import_ctranslate2(const Ct2ImportOptions& opt) {
  if (opt.out.empty()) throw ConfigError("import-ctranslate2: give --out FILE");
  Ct2ImportResult result;
  const auto ck = ctranslate2_checkpoint(opt, &result);
  auto loaded = checkpoint::load_model(ck, opt.model);
  result.src_vocab = loaded.src_vocab_size;
  result.tgt_vocab = loaded.tgt_vocab_size;
  result.parameters = models::count_parameters(*loaded.model);
  checkpoint::save_checkpoint(opt.out, ck.config_yaml, ck.vocab, checkpoint::TrainerProgress{}, *loaded.model, nullptr,
                              ck.storage);
  return result;
}

}  // namespace leanseq::interop

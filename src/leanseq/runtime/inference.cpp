#include "leanseq/runtime/inference.h"

#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/spm.h"
#include "leanseq/interop/ctranslate2.h"
#include "leanseq/nn/packed_weight.h"
#include "leanseq/text/moses_bpe.h"

namespace leanseq::runtime {

namespace {
// The helper reads a model from a file: one in a private directory of its own, removed as soon as
// the helper has read it, whether or not it could load it.
std::shared_ptr<data::SentencePiece> spm_from_bytes(const std::string& bytes, const std::string& origin) {
  const io::PrivateDirectory dir("leanseq-spm");
  const std::string path = dir.path() + "/spm.model";  // nobody else sees the directory: no rename needed
  io::FileWriter file(path);
  file.write(bytes.data(), bytes.size());
  file.close();
  try {
    return std::make_shared<data::SentencePiece>(path);  // the helper has read it now
  } catch (const DataError& e) {
    throw CheckpointError(origin + ": its SentencePiece model cannot be loaded: " + e.what());
  }
}
// A leanseq checkpoint, a CTranslate2 model directory or an Argos Translate package, as a model.
checkpoint::LoadedModel load_any(const std::string& path, bool dense = false) {
  if (!interop::is_ctranslate2_model(path)) return checkpoint::load_model(path, dense);
  interop::Ct2ImportOptions o;
  o.model = path;
  return checkpoint::load_model(interop::ctranslate2_checkpoint(o), path, dense);
}
}  // namespace

std::pair<std::shared_ptr<const data::TextPipeline>, std::shared_ptr<const data::TextPipeline>> text_pipelines(
    const checkpoint::VocabFiles& v, const std::string& origin) {
  if (!v.tokenizer.empty()) {
    text::TokenizerSpec spec;
    try {
      spec = text::parse_tokenizer_spec(v.tokenizer, origin);
    } catch (const ConfigError& e) {
      throw CheckpointError(e.what());
    }
    return {std::make_shared<text::MosesBpePipeline>(v.src_lang, spec, v.bpe_codes, origin + " (BPE codes)"),
            std::make_shared<text::MosesBpePipeline>(v.tgt_lang, spec, v.bpe_codes, origin + " (BPE codes)")};
  }
  auto src_spm = spm_from_bytes(v.src_spm, origin);
  return {src_spm, v.tgt_spm == v.src_spm ? src_spm : spm_from_bytes(v.tgt_spm, origin)};
}

LoadedTranslator load_translator(const std::string& checkpoint_path, bool dense) {
  LoadedTranslator out;
  out.loaded = load_any(checkpoint_path, dense);
  const auto& v = out.loaded.vocab;
  const auto [src_text, tgt_text] = text_pipelines(v, checkpoint_path);
  out.translator = std::make_unique<decode::Translator>(
      out.loaded.model, data::Dictionary::parse(v.src_dict, checkpoint_path + " (source dictionary)"),
      data::Dictionary::parse(v.tgt_dict, checkpoint_path + " (target dictionary)"), src_text, tgt_text);
  out.translator->set_source_framing(v.source_bos, v.source_eos);
  out.translator->set_max_len_cuts(v.max_len_cuts);
  out.translator->set_continues_source(out.loaded.model_config->language_model());
  return out;
}

std::shared_ptr<models::Seq2SeqModel> load_ensemble_member(const LoadedTranslator& first, const std::string& first_path,
                                                           const std::string& checkpoint_path) {
  auto member = load_any(checkpoint_path);
  if (member.model_config->language_model() != first.loaded.model_config->language_model()) {
    throw ConfigError(checkpoint_path + ": an ensemble is of translation models or of language models, not both");
  }
  const auto& a = first.loaded.vocab;
  const auto& b = member.vocab;
  const char* differs = a.src_dict != b.src_dict   ? "source dictionary"
                        : a.tgt_dict != b.tgt_dict ? "target dictionary"
                        : (a.src_spm != b.src_spm || a.tgt_spm != b.tgt_spm || a.tokenizer != b.tokenizer ||
                           a.bpe_codes != b.bpe_codes || a.source_bos != b.source_bos || a.source_eos != b.source_eos ||
                           a.max_len_cuts != b.max_len_cuts)
                            ? "text pipeline"
                            : nullptr;
  if (differs) {
    throw CheckpointError(checkpoint_path + ": its " + differs + " differs from " + first_path +
                          "'s; an ensemble needs the same dictionaries and text pipeline");
  }
  return member.model;
}

void add_ensemble(LoadedTranslator& first, const std::vector<std::string>& paths, const torch::Device& device) {
  first.loaded.model->to(device);
  for (size_t i = 1; i < paths.size(); ++i) {
    auto member = load_ensemble_member(first, paths.front(), paths[i]);
    member->to(device);
    first.translator->add_ensemble_member(member);
  }
}

kernels::ResolvedComputeType set_compute_type(LoadedTranslator& lt, kernels::ComputeTypeRequest request,
                                              const torch::Device& device) {
  if (request == kernels::ComputeTypeRequest::default_) request = kernels::request_for(lt.loaded.storage);
  auto resolved = kernels::resolve_compute_type(request, device.is_cuda());
  for (auto* model : lt.translator->models()) nn::set_compute_type(*model, resolved.type);
  return resolved;
}

void check_checkpoints_exist(const std::vector<std::string>& paths) {
  for (const auto& p : paths) {
    if (!std::filesystem::exists(p)) throw DataError(p + ": checkpoint not found");
  }
}

kernels::ComputeTypeRequest compute_type_request(const std::string& name, const std::string& key) {
  try {
    return kernels::parse_compute_type(name);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(key + ": " + e.what());
  }
}

LoadedTranslator load_for_inference(const std::vector<std::string>& paths, const torch::Device& device,
                                    kernels::ComputeTypeRequest request, kernels::ResolvedComputeType& resolved) {
  auto lt = load_translator(paths.front());
  add_ensemble(lt, paths, device);
  resolved = set_compute_type(lt, request, device);
  return lt;
}

}  // namespace leanseq::runtime

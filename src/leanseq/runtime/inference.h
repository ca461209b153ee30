// A ready Translator from a checkpoint alone (model, dictionaries, SentencePiece models).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/model.h"
#include "leanseq/decode/translator.h"

namespace leanseq::runtime {

struct LoadedTranslator {
  checkpoint::LoadedModel loaded;
  std::unique_ptr<decode::Translator> translator;
};

// `dense`: as load_model.
LoadedTranslator load_translator(const std::string& checkpoint_path, bool dense = false);

// The source and target text pipelines of a checkpoint's vocabulary files: SentencePiece (one
// object when both sides share the model) or Moses + subword-nmt BPE; `origin` names them in errors.
std::pair<std::shared_ptr<const data::TextPipeline>, std::shared_ptr<const data::TextPipeline>> text_pipelines(
    const checkpoint::VocabFiles& v, const std::string& origin);

// The model of `checkpoint_path`, to decode as an ensemble with `first`: CheckpointError naming
// both files when their dictionaries or text pipelines differ.
std::shared_ptr<models::Seq2SeqModel> load_ensemble_member(const LoadedTranslator& first, const std::string& first_path,
                                                           const std::string& checkpoint_path);

// Moves `first` (loaded from paths[0]) to `device` and adds the models of paths[1..] to its
// translator as its ensemble, on that device.
void add_ensemble(LoadedTranslator& first, const std::vector<std::string>& paths, const torch::Device& device);

// DataError "<path>: checkpoint not found" for the first of `paths` that does not exist (checked
// before anything loads: a missing ensemble member is named before the first model is read).
void check_checkpoints_exist(const std::vector<std::string>& paths);

// `name` ("int8", "auto", ...) as a compute type request; ConfigError "<key>: ..." for another.
kernels::ComputeTypeRequest compute_type_request(const std::string& name, const std::string& key);

// paths[0] loaded, paths[1..] as its ensemble, all on `device`, their products packed for the type
// `request` resolves to (set_compute_type's result in `resolved`): what every surface that
// translates loads.
LoadedTranslator load_for_inference(const std::vector<std::string>& paths, const torch::Device& device,
                                    kernels::ComputeTypeRequest request, kernels::ResolvedComputeType& resolved);

// Packs the matrix products of every model of `lt` (after add_ensemble: on `device`) for the type
// `request` resolves to on this CPU or on CUDA (`default`: the type the first checkpoint's
// weights were stored in), and returns that type with the notice of a fallback.
kernels::ResolvedComputeType set_compute_type(LoadedTranslator& lt, kernels::ComputeTypeRequest request,
                                              const torch::Device& device);

}  // namespace leanseq::runtime

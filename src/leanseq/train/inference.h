// A ready Translator from a checkpoint alone (model, dictionaries, SentencePiece models).
#pragma once
#include <memory>
#include <string>

#include "leanseq/decode/translator.h"
#include "leanseq/train/checkpoint.h"

namespace leanseq::train {

struct LoadedTranslator {
  LoadedModel loaded;
  std::unique_ptr<decode::Translator> translator;
};

// `dense`: as load_model.
LoadedTranslator load_translator(const std::string& checkpoint_path, bool dense = false);

// The model of `checkpoint_path`, to decode as an ensemble with `first`: CheckpointError naming
// both files when their dictionaries or text pipelines differ.
std::shared_ptr<models::Seq2SeqModel> load_ensemble_member(const LoadedTranslator& first, const std::string& first_path,
                                                           const std::string& checkpoint_path);

}  // namespace leanseq::train

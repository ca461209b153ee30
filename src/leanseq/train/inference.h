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

}  // namespace leanseq::train

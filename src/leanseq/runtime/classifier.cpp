#include "leanseq/runtime/classifier.h"

#include "leanseq/core/error.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/train/checkpoint.h"

namespace leanseq::runtime {

LoadedClassifier load_classifier(const std::string& path, bool dense) {
  auto ck = train::read_checkpoint(path);
  auto values = parse_yaml_text(ck.config_yaml, path + " (config)");
  if (!train::is_classifier_config(values)) {
    throw CheckpointError(path + ": not a text classifier checkpoint (use leanseq translate for sequence models)");
  }
  LoadedClassifier out;
  out.config = train::resolve_classify_config(values);
  train::read_classifier_vocab(ck.vocab, path, out.dict, out.labels);
  out.model = models::build_classifier(*out.config.model, out.dict.size());
  models::load_named_tensors(*out.model, ck.model_tensors, true, path);
  if (!dense) nn::prune_as_evaluated(*out.model, out.config.td);
  out.model->eval();
  return out;
}

}  // namespace leanseq::runtime

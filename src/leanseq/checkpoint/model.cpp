#include "leanseq/checkpoint/model.h"

#include <algorithm>

#include "leanseq/core/error.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"

namespace leanseq::checkpoint {

LoadedModel load_model(const std::string& path, bool dense) { return load_model(read_checkpoint(path), path, dense); }

RunConfig training_config(const Checkpoint& ck, const std::string& path) {
  auto values = parse_yaml_text(ck.config_yaml, path + " (config)");
  if (is_classifier_config(values)) {
    throw CheckpointError(path + ": a text classifier checkpoint, not a sequence model (use leanseq classify)");
  }
  return resolve_run_config(values);
}

LoadedModel load_model(const Checkpoint& ck, const std::string& path, bool dense) {
  const auto config = training_config(ck, path);
  LoadedModel out;
  out.arch = config.arch;
  out.model_config = config.model;
  out.vocab = ck.vocab;
  out.storage = ck.storage;
  // Dictionary sizes come from the stored dict.txt contents.
  auto count_lines = [](const std::string& s) {
    return static_cast<int64_t>(std::count(s.begin(), s.end(), '\n')) + data::Dictionary::kNumSpecial;
  };
  out.src_vocab_size = count_lines(ck.vocab.src_dict);
  out.tgt_vocab_size = count_lines(ck.vocab.tgt_dict);
  out.model = models::build_model(*config.model, {out.src_vocab_size, out.tgt_vocab_size, ck.vocab.joint});
  models::load_named_tensors(*out.model, ck.model_tensors, true, path);
  if (!dense) nn::prune_as_evaluated(*out.model, config.td);
  out.model->eval();
  return out;
}

}  // namespace leanseq::checkpoint

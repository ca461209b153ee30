#include "leanseq/checkpoint/classify_config.h"

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/models/registry.h"

namespace leanseq::checkpoint {

void ClassifyConfig::visit(ConfigVisitor& v) {
  v.field("task", task, "classify (text classification) or seq2seq");
  v.field("arch", arch, "classifier preset (leanseq list-archs: family classifier)");
  v.field("data.train", train_file, "training TSV: text<TAB>label, or text1<TAB>text2<TAB>label for pairs");
  v.field("data.valid", valid_file, "validation TSV (same columns)");
  v.field("data.test", test_file, "test TSV, scored with checkpoint_best after training (optional)");
  v.field("data.min_count", min_count, "words seen fewer times in training become <unk>", Range::at_least(1));
  visit_loop(v);
  if (model) {
    PrefixedVisitor pv("model", v);
    model->visit(pv);
  }
  v.field("optim.lr", lr, "Adam learning rate", Range::above(0));
  adam.visit(v, "L2 weight decay");
  v.field("optim.lr_shrink", lr_shrink, "multiply the LR by this after a validation without improvement (1: never)", Range::left_open(0, 1));
  v.field("batch.max_sentences", max_sentences, "examples per batch", Range::at_least(1));
  v.field("batch.max_tokens", max_tokens, "padded tokens per batch (0: no limit)", Range::at_least(0));
  v.field("pruned.method", pruned_method, "set by leanseq prune: weight or unit magnitude pruning");
  v.field("pruned.sparsity", pruned_sparsity, "set by leanseq prune: the fraction of prunable weights set to zero", kProbability);
}

void ClassifyConfig::validate() const {
  auto bad = [](const std::string& msg) { throw ConfigError(msg); };
  if (task != "classify") bad("task: expected classify, got '" + task + "'");
  if (train_file.empty()) bad("data.train: no training file (a TSV of text<TAB>label lines)");
  if (valid_file.empty()) bad("data.valid: no validation file (a TSV of text<TAB>label lines)");
  if (max_epoch == 0 && max_update == 0 && max_minutes == 0 && patience == 0) {
    bad("stop: set stop.max_epoch, stop.max_update, stop.max_minutes or stop.patience");
  }
  validate_loop();
  model->validate();
}

ClassifyConfig resolve_classify_config(const ConfigValues& values) {
  auto cfg = unchecked_classify_config(values);
  cfg.validate();
  return cfg;
}

ClassifyConfig unchecked_classify_config(const ConfigValues& values) {
  ClassifyConfig cfg;
  auto it = values.values.find("arch");
  if (it != values.values.end()) cfg.arch = it->second;
  auto base = models::registry().preset_config(cfg.arch);
  cfg.model = std::dynamic_pointer_cast<models::ClassifierConfig>(base);
  if (!cfg.model) {
    throw ConfigError("arch " + cfg.arch + " is a " + base->family() +
                      " sequence model, not a text classifier (classifier archs: disan, disan_small, "
                      "transformer_classifier, lightconv_classifier)");
  }
  apply_config(cfg, values);
  return cfg;
}

VocabFiles classifier_vocab(const data::Dictionary& dict, const std::vector<std::string>& labels) {
  VocabFiles v;
  v.src_lang = "text", v.tgt_lang = "label";
  v.src_dict = dict.to_text();
  for (const auto& l : labels) v.tgt_dict += l + "\n";
  return v;
}

void read_classifier_vocab(const VocabFiles& v, const std::string& path, data::Dictionary& dict,
                           std::vector<std::string>& labels) {
  dict = data::Dictionary::parse(v.src_dict, path + " (dictionary)");
  labels = io::split_lines(v.tgt_dict, path + " (labels)");
}

}  // namespace leanseq::checkpoint

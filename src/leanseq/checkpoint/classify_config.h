// The resolved configuration of a text classification run (task: classify) and what a classifier
// checkpoint stores of its vocabularies. Precedence as for RunConfig (checkpoint/run_config.h).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/loop_options.h"
#include "leanseq/core/config.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/models/classifier.h"

namespace leanseq::checkpoint {

struct ClassifyConfig : Configurable, TrainLoopOptions {
  ClassifyConfig() { no_epoch_checkpoints = true; }
  std::string task = "classify";
  std::string arch = "disan";
  std::string train_file, valid_file, test_file;  // data.train, data.valid, data.test (TSV)
  int64_t min_count = 1;                          // data.min_count
  std::shared_ptr<models::ClassifierConfig> model;

  double lr = 1e-3;
  AdamSettings adam{0.9, 0.999};
  double lr_shrink = 1.0;  // multiply the LR by this after a validation that does not improve (1: never)
  int64_t max_sentences = 64, max_tokens = 0;
  std::string pruned_method;  // pruned.*: set by leanseq prune
  double pruned_sparsity = 0;

  void visit(ConfigVisitor& v) override;
  void validate() const;
};

// Builds a ClassifyConfig from layered values ("arch" selects the preset first).
ClassifyConfig resolve_classify_config(const ConfigValues& values);
// The same without validate() (to list keys).
ClassifyConfig unchecked_classify_config(const ConfigValues& values);

// What a classifier checkpoint stores of its vocabularies: the word dictionary as the source
// dictionary, the labels (one per line) as the target's; and back.
VocabFiles classifier_vocab(const data::Dictionary& dict, const std::vector<std::string>& labels);
void read_classifier_vocab(const VocabFiles& v, const std::string& path, data::Dictionary& dict,
                           std::vector<std::string>& labels);

}  // namespace leanseq::checkpoint

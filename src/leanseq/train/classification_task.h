// The text classification task of the training engine: a models::SentenceClassifier trained on
// labelled TSV files (text<TAB>label, or text1<TAB>text2<TAB>label for pairs) with cross-entropy
// per example; validation accuracy picks checkpoint_best; a test file is scored with it at the end.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "leanseq/core/config.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/text_classification.h"
#include "leanseq/eval/classification.h"
#include "leanseq/models/classifier.h"
#include "leanseq/train/checkpoint.h"
#include "leanseq/train/loop_options.h"

namespace leanseq::train {

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

// Class probabilities [N, classes] of every example, in order (eval mode, batches of by length).
torch::Tensor predict_probabilities(models::SentenceClassifier& model, const data::EncodedText& data,
                                    int64_t max_sentences, const torch::Device& device = torch::kCPU);

// Predictions and scores of a labelled dataset.
eval::ClassifyReport evaluate_classifier(models::SentenceClassifier& model, const data::EncodedText& data,
                                         const std::vector<std::string>& labels, int64_t max_sentences,
                                         const torch::Device& device = torch::kCPU);

struct ClassifyOutcome {
  int signal = 0;
  int64_t num_updates = 0, epochs_done = 0;
  double best_valid_accuracy = 0;
  double train_seconds = 0, examples_per_second = 0;
  std::optional<eval::ClassifyReport> test;  // checkpoint_best on data.test, when given
};

// Trains with the engine (train/trainer.h); with `resume`, continues from
// <save_dir>/checkpoint_last.pt when it exists. Writes checkpoint_last.pt, checkpoint_best.pt (by
// valid accuracy), train_log.jsonl and, with a test file, test_report.json. Under a distributed
// launch (WORLD_SIZE set) this process is one rank.
ClassifyOutcome train_classifier(ClassifyConfig cfg, bool resume);

// What a classifier checkpoint stores of its vocabularies: the word dictionary as the source
// dictionary, the labels (one per line) as the target's; and back.
VocabFiles classifier_vocab(const data::Dictionary& dict, const std::vector<std::string>& labels);
void read_classifier_vocab(const VocabFiles& v, const std::string& path, data::Dictionary& dict,
                           std::vector<std::string>& labels);

}  // namespace leanseq::train

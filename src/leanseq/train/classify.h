// The text classification task: training a models::SentenceClassifier on labelled TSV files,
// scoring (accuracy, per-class precision/recall/F1, confusion matrix) and prediction.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "leanseq/core/config.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/text_classification.h"
#include "leanseq/models/classifier.h"
#include "leanseq/nn/targeted_dropout.h"
#include "leanseq/train/checkpoint.h"

namespace leanseq::train {

struct ClassifyConfig : Configurable {
  std::string task = "classify";
  std::string arch = "disan";
  std::string train_file, valid_file, test_file;  // data.train, data.valid, data.test (TSV)
  int64_t min_count = 1;                          // data.min_count
  std::string save_dir = "checkpoints";
  int64_t seed = 1;
  int64_t threads = 0;
  std::string device = "cpu";
  std::shared_ptr<models::ClassifierConfig> model;

  double lr = 1e-3, adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8, weight_decay = 0.0, clip_norm = 0.0;
  double lr_shrink = 1.0;  // multiply the LR by this after a validation that does not improve (1: never)
  int64_t max_sentences = 64, max_tokens = 0;
  int64_t max_epoch = 0, max_update = 0;
  double max_minutes = 0;
  int64_t patience = 0;  // stop after N validations without a better accuracy (0: never)
  int64_t log_interval = 100;
  int64_t validate_interval_updates = 0;
  nn::TargetedDropoutOptions td;  // td.*: targeted dropout of the encoder's and head's weights
  std::string pruned_method;      // pruned.*: set by leanseq prune
  double pruned_sparsity = 0;

  void visit(ConfigVisitor& v) override;
  void validate() const;
};

// Builds a ClassifyConfig from layered values ("arch" selects the preset first).
ClassifyConfig resolve_classify_config(const ConfigValues& values);

struct ClassScores {
  std::string label;
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;
};

struct ClassifyReport {
  int64_t examples = 0, correct = 0;
  double accuracy = 0, macro_f1 = 0;
  double loss = -1;  // mean cross-entropy (nats) when known
  std::vector<ClassScores> classes;
  std::vector<std::vector<int64_t>> confusion;  // [gold][predicted]
  std::string json() const;
  std::string text() const;  // a few aligned lines
};

// Scores predictions against gold label indices.
ClassifyReport score_predictions(const std::vector<int64_t>& gold, const std::vector<int64_t>& predicted,
                                 const std::vector<std::string>& labels);

// Class probabilities [N, classes] of every example, in order (eval mode, batches of by length).
torch::Tensor predict_probabilities(models::SentenceClassifier& model, const data::EncodedText& data,
                                    int64_t max_sentences, const torch::Device& device = torch::kCPU);

// Predictions and scores of a labelled dataset.
ClassifyReport evaluate_classifier(models::SentenceClassifier& model, const data::EncodedText& data,
                                   const std::vector<std::string>& labels, int64_t max_sentences,
                                   const torch::Device& device = torch::kCPU);

struct ClassifyOutcome {
  int signal = 0;
  int64_t num_updates = 0, epochs_done = 0;
  double best_valid_accuracy = 0;
  double train_seconds = 0, examples_per_second = 0;
  std::optional<ClassifyReport> test;  // checkpoint_best on data.test, when given
};

// Trains; with `resume`, continues from <save_dir>/checkpoint_last.pt when it exists. Writes
// checkpoint_last.pt, checkpoint_best.pt (by valid accuracy), train_log.jsonl and, with a test
// file, test_report.json.
ClassifyOutcome train_classifier(ClassifyConfig cfg, bool resume);

// What a classifier checkpoint stores of its vocabularies: the word dictionary as the source
// dictionary, the labels (one per line) as the target's.
VocabFiles classifier_vocab(const data::Dictionary& dict, const std::vector<std::string>& labels);

struct LoadedClassifier {
  models::SentenceClassifier model{nullptr};
  ClassifyConfig config;
  data::Dictionary dict;
  std::vector<std::string> labels;
};
// Throws CheckpointError naming the file when it is not a classifier checkpoint. A classifier
// trained with targeted dropout (td.eval_prune) comes pruned as it was evaluated, unless `dense`
// asks for the weights as trained.
LoadedClassifier load_classifier(const std::string& path, bool dense = false);

}  // namespace leanseq::train

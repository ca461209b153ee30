// The text classification task of the training engine: a models::SentenceClassifier trained on
// labelled TSV files (text<TAB>label, or text1<TAB>text2<TAB>label for pairs) with cross-entropy
// per example; validation accuracy picks checkpoint_best; a test file is scored with it at the end.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "leanseq/checkpoint/classify_config.h"
#include "leanseq/core/config.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/text_classification.h"
#include "leanseq/eval/classification.h"
#include "leanseq/models/classifier.h"

namespace leanseq::train {

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
ClassifyOutcome train_classifier(checkpoint::ClassifyConfig cfg, bool resume);

}  // namespace leanseq::train

// A text classifier rebuilt from its checkpoint alone, for `leanseq classify`, pruning and Python.
#pragma once
#include <string>
#include <vector>

#include "leanseq/data/dictionary.h"
#include "leanseq/models/classifier.h"
#include "leanseq/train/classification_task.h"

namespace leanseq::runtime {

struct LoadedClassifier {
  models::SentenceClassifier model{nullptr};
  train::ClassifyConfig config;
  data::Dictionary dict;
  std::vector<std::string> labels;
};

// Throws CheckpointError naming the file when it is not a classifier checkpoint. A classifier
// trained with targeted dropout (td.eval_prune) comes pruned as it was evaluated, unless `dense`
// asks for the weights as trained.
LoadedClassifier load_classifier(const std::string& path, bool dense = false);

}  // namespace leanseq::runtime

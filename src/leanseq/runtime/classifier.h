// A text classifier rebuilt from its checkpoint alone, for `leanseq classify`, pruning and Python,
// and its predictions over a dataset (also training's validation).
#pragma once
#include <torch/torch.h>

#include <string>
#include <vector>

#include "leanseq/checkpoint/classify_config.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/text_classification.h"
#include "leanseq/eval/classification.h"
#include "leanseq/models/classifier.h"

namespace leanseq::runtime {

struct LoadedClassifier {
  models::SentenceClassifier model{nullptr};
  bool pair = false;  // whether each example is a pair of sentences (the model's `pair`)
  data::Dictionary dict;
  std::vector<std::string> labels;
};

// Throws CheckpointError naming the file when it is not a classifier checkpoint. A classifier
// trained with targeted dropout (td.eval_prune) comes pruned as it was evaluated, unless `dense`
// asks for the weights as trained.
LoadedClassifier load_classifier(const std::string& path, bool dense = false);

// Class probabilities [N, classes] of every example, in order (eval mode, batches of by length).
torch::Tensor predict_probabilities(models::SentenceClassifier& model, const data::EncodedText& data,
                                    int64_t max_sentences, const torch::Device& device = torch::kCPU);

// Predictions and scores of a labelled dataset.
eval::ClassifyReport evaluate_classifier(models::SentenceClassifier& model, const data::EncodedText& data,
                                         const std::vector<std::string>& labels, int64_t max_sentences,
                                         const torch::Device& device = torch::kCPU);

}  // namespace leanseq::runtime

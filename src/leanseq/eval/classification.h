// Scores of a classifier's predictions: accuracy, per-class precision/recall/F1, macro F1 and the
// confusion matrix.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace leanseq::eval {

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

}  // namespace leanseq::eval

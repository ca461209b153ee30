#include "leanseq/eval/classification.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace leanseq::eval {

ClassifyReport score_predictions(const std::vector<int64_t>& gold, const std::vector<int64_t>& predicted,
                                 const std::vector<std::string>& labels) {
  const auto n = labels.size();
  ClassifyReport r;
  r.examples = static_cast<int64_t>(gold.size());
  r.confusion.assign(n, std::vector<int64_t>(n, 0));
  for (size_t i = 0; i < gold.size(); ++i) {
    r.confusion[static_cast<size_t>(gold[i])][static_cast<size_t>(predicted[i])]++;
    r.correct += gold[i] == predicted[i];
  }
  r.accuracy = r.examples ? static_cast<double>(r.correct) / static_cast<double>(r.examples) : 0.0;
  for (size_t c = 0; c < n; ++c) {
    ClassScores s;
    s.label = labels[c];
    int64_t predicted_c = 0;
    for (size_t g = 0; g < n; ++g) predicted_c += r.confusion[g][c];
    for (size_t p = 0; p < n; ++p) s.support += r.confusion[c][p];
    const auto tp = static_cast<double>(r.confusion[c][c]);
    s.precision = predicted_c ? tp / static_cast<double>(predicted_c) : 0.0;
    s.recall = s.support ? tp / static_cast<double>(s.support) : 0.0;
    s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0.0;
    r.macro_f1 += s.f1 / static_cast<double>(n);
    r.classes.push_back(s);
  }
  return r;
}

std::string ClassifyReport::json() const {
  nlohmann::json j;
  j["examples"] = examples;
  j["correct"] = correct;
  j["accuracy"] = accuracy;
  j["macro_f1"] = macro_f1;
  if (loss >= 0) j["loss"] = loss;
  auto& cls = j["classes"] = nlohmann::json::array();
  for (const auto& c : classes) {
    cls.push_back({{"label", c.label}, {"precision", c.precision}, {"recall", c.recall}, {"f1", c.f1}, {"support", c.support}});
  }
  j["confusion"] = confusion;
  return j.dump(2) + "\n";
}

std::string ClassifyReport::text() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "accuracy %.2f%% (%lld/%lld), macro F1 %.2f\n", 100 * accuracy,
                static_cast<long long>(correct), static_cast<long long>(examples), 100 * macro_f1);
  std::string out = buf;
  for (const auto& c : classes) {
    std::snprintf(buf, sizeof buf, "  label %-12s precision %6.2f  recall %6.2f  F1 %6.2f  support %lld\n",
                  c.label.c_str(), 100 * c.precision, 100 * c.recall, 100 * c.f1, static_cast<long long>(c.support));
    out += buf;
  }
  return out;
}

}  // namespace leanseq::eval

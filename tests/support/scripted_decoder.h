// A step decoder for beam search tests: its next-token log-probabilities depend only on the last
// token, from a fixed table; it counts its steps and the reorders that drop rows.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "leanseq/decode/beam_search.h"

namespace leanseq::test {

class ScriptedDecoder : public decode::StepDecoder {
 public:
  explicit ScriptedDecoder(torch::Tensor table) : table_(std::move(table)) {}
  torch::Tensor step(const torch::Tensor& last, torch::Tensor*) override {
    ++steps;
    return table_.index_select(0, last);
  }
  void reorder(const torch::Tensor& order, bool within) override {
    last_order = order;
    if (!within) ++shrinks;
  }
  int steps = 0, shrinks = 0;
  torch::Tensor last_order;

 private:
  torch::Tensor table_;
};

// The log of a table of probabilities, one row per last token.
inline torch::Tensor log_table(const std::vector<std::vector<float>>& probs) {
  std::vector<float> flat;
  for (const auto& r : probs) flat.insert(flat.end(), r.begin(), r.end());
  return torch::tensor(flat).view({static_cast<int64_t>(probs.size()), -1}).log();
}

}  // namespace leanseq::test

#include "leanseq/runtime/language_model.h"

#include <algorithm>

#include "leanseq/data/dictionary.h"

namespace leanseq::runtime {

std::vector<std::vector<float>> score_lm_blocks(models::Seq2SeqModel& model, const std::vector<data::LmBlock>& blocks,
                                                int64_t max_tokens, int64_t vocab, int64_t* batches) {
  torch::NoGradGuard no_grad;
  if (model.is_training()) model.eval();
  const auto device = model.parameters().front().device();
  constexpr int64_t kMaxLogits = int64_t{1} << 24;
  const int64_t budget = std::max<int64_t>(1, std::min(max_tokens, kMaxLogits / std::max<int64_t>(vocab, 1)));
  std::vector<std::vector<float>> out;
  out.reserve(blocks.size());
  for (size_t from = 0; from < blocks.size();) {
    // Consecutive blocks while the padded batch stays within the budget.
    size_t to = from + 1;
    auto longest = static_cast<int64_t>(blocks[from].source.size());
    while (to < blocks.size()) {
      const auto t = std::max<int64_t>(longest, static_cast<int64_t>(blocks[to].source.size()));
      if (t * static_cast<int64_t>(to + 1 - from) > budget) break;
      longest = t;
      ++to;
    }
    const auto B = static_cast<int64_t>(to - from);
    auto src = torch::full({B, longest}, data::Dictionary::kPad, torch::kLong);
    auto lengths = torch::empty({B}, torch::kLong);
    for (int64_t b = 0; b < B; ++b) {
      const auto& s = blocks[from + static_cast<size_t>(b)].source;
      std::copy(s.begin(), s.end(), src[b].data_ptr<int64_t>());
      lengths[b] = static_cast<int64_t>(s.size());
    }
    src = src.to(device);
    auto enc = model.encode(src, lengths.to(device));
    const auto lprobs = torch::log_softmax(model.decode(src, enc).logits.to(torch::kFloat), -1).cpu().contiguous();
    const auto at = lprobs.accessor<float, 3>();
    for (int64_t b = 0; b < B; ++b) {
      const auto& block = blocks[from + static_cast<size_t>(b)];
      std::vector<float> scores;
      scores.reserve(block.target.size());
      for (size_t j = 0; j < block.target.size(); ++j) {
        scores.push_back(at[b][static_cast<int64_t>(block.context + j)][block.target[j]]);
      }
      out.push_back(std::move(scores));
    }
    from = to;
    if (batches) ++*batches;
  }
  return out;
}

}  // namespace leanseq::runtime

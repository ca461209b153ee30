#include "leanseq/data/batching.h"

#include <algorithm>
#include <random>

#include "leanseq/core/error.h"
#include "leanseq/data/dictionary.h"

namespace leanseq::data {

Batch Batch::to(const torch::Device& device) const {
  Batch b = *this;
  b.src = src.to(device);
  b.src_lengths = src_lengths.to(device);
  if (prev_output.defined()) b.prev_output = prev_output.to(device);
  if (target.defined()) b.target = target.to(device);
  return b;
}

Batch collate(const std::vector<std::vector<int64_t>>& src, const std::vector<std::vector<int64_t>>& tgt,
              std::vector<int64_t> ids, bool decoder_input_is_source) {
  const int64_t B = static_cast<int64_t>(src.size());
  Batch b;
  int64_t S = 0;
  for (const auto& s : src) S = std::max<int64_t>(S, s.size());
  b.src = torch::full({B, S}, Dictionary::kPad, torch::kLong);
  b.src_lengths = torch::empty({B}, torch::kLong);
  auto sa = b.src.accessor<int64_t, 2>();
  for (int64_t i = 0; i < B; ++i) {
    for (size_t j = 0; j < src[i].size(); ++j) sa[i][j] = src[i][j];
    b.src_lengths[i] = static_cast<int64_t>(src[i].size());
  }
  if (!tgt.empty()) {
    int64_t T = 0;
    for (const auto& t : tgt) T = std::max<int64_t>(T, t.size());
    b.target = torch::full({B, T}, Dictionary::kPad, torch::kLong);
    b.prev_output = torch::full({B, T}, Dictionary::kPad, torch::kLong);
    auto ta = b.target.accessor<int64_t, 2>();
    auto pa = b.prev_output.accessor<int64_t, 2>();
    for (int64_t i = 0; i < B; ++i) {
      const auto& t = tgt[i];
      for (size_t j = 0; j < t.size(); ++j) {
        ta[i][j] = t[j];
        pa[i][j] = decoder_input_is_source ? src[i][j] : j == 0 ? Dictionary::kEos : t[j - 1];
      }
      b.ntokens += static_cast<int64_t>(t.size());
    }
  }
  b.ids = std::move(ids);
  return b;
}

PairDataset::PairDataset(const std::string& src_prefix, const std::optional<std::string>& tgt_prefix,
                         bool decoder_input_is_source)
    : src_(src_prefix), decoder_input_is_source_(decoder_input_is_source) {
  if (tgt_prefix) {
    tgt_.emplace(*tgt_prefix);
    if (tgt_->size() != src_.size()) {
      throw DataError(*tgt_prefix + ".idx: " + std::to_string(tgt_->size()) + " sentences but " +
                      src_prefix + ".idx has " + std::to_string(src_.size()));
    }
  }
  for (size_t i = 0; decoder_input_is_source && i < src_.size(); ++i) {
    if (!tgt_ || src_.length(i) != tgt_->length(i)) {
      throw DataError(src_prefix + ".idx: sample " + std::to_string(i) + "'s input is not as long as its target");
    }
  }
}

std::vector<std::pair<int64_t, int64_t>> PairDataset::lengths(size_t n) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  n = std::min(n, size());
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.emplace_back(src_len(i), tgt_len(i));
  return out;
}

Batch PairDataset::batch(const std::vector<int64_t>& ids) const {
  std::vector<std::vector<int64_t>> s, t;
  for (int64_t i : ids) {
    s.push_back(src_.get(i));
    if (tgt_) t.push_back(tgt_->get(i));
  }
  return collate(s, t, ids, decoder_input_is_source_);
}

std::vector<std::vector<int64_t>> batch_by_size(const std::vector<std::pair<int64_t, int64_t>>& lengths,
                                                const BatchingOptions& opt) {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < static_cast<int64_t>(lengths.size()); ++i) {
    if (!opt.too_long(lengths[i])) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (lengths[a].second != lengths[b].second) return lengths[a].second < lengths[b].second;
    return lengths[a].first < lengths[b].first;
  });
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> cur;
  int64_t max_src = 0, max_tgt = 0;
  auto over = [&](int64_t n, int64_t src, int64_t tgt) {
    return std::max(src, tgt) * n > opt.max_tokens || (opt.max_cells > 0 && n * src * tgt > opt.max_cells) ||
           (opt.max_sentences > 0 && n > opt.max_sentences);
  };
  for (int64_t i : order) {
    const int64_t src = std::max(max_src, lengths[i].first), tgt = std::max(max_tgt, lengths[i].second);
    if (!cur.empty() && over(static_cast<int64_t>(cur.size()) + 1, src, tgt)) {
      // Keep a multiple of required_multiple in the batch; carry the rest over.
      size_t keep = cur.size();
      if (opt.required_multiple > 1 && keep > static_cast<size_t>(opt.required_multiple)) {
        keep -= keep % opt.required_multiple;
      }
      std::vector<int64_t> rest(cur.begin() + keep, cur.end());
      cur.resize(keep);
      batches.push_back(std::move(cur));
      cur = std::move(rest);
      max_src = max_tgt = 0;
      for (int64_t j : cur) max_src = std::max(max_src, lengths[j].first), max_tgt = std::max(max_tgt, lengths[j].second);
    }
    cur.push_back(i);
    max_src = std::max(max_src, lengths[i].first);
    max_tgt = std::max(max_tgt, lengths[i].second);
  }
  if (!cur.empty()) batches.push_back(std::move(cur));
  return batches;
}

Padding padding_of(const std::vector<std::vector<int64_t>>& batches,
                   const std::vector<std::pair<int64_t, int64_t>>& lengths) {
  Padding p;
  for (const auto& batch : batches) {
    int64_t max_src = 0, max_tgt = 0;
    for (int64_t i : batch) {
      p.src_tokens += lengths[i].first;
      p.tgt_tokens += lengths[i].second;
      max_src = std::max(max_src, lengths[i].first);
      max_tgt = std::max(max_tgt, lengths[i].second);
    }
    const auto n = static_cast<int64_t>(batch.size());
    p.src_positions += n * max_src;
    p.tgt_positions += n * max_tgt;
  }
  return p;
}

int64_t first_too_long(const std::vector<std::pair<int64_t, int64_t>>& lengths, const BatchingOptions& opt) {
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (opt.too_long(lengths[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

void shuffle_batches(std::vector<std::vector<int64_t>>& batches, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::shuffle(batches.begin(), batches.end(), rng);
}

}  // namespace leanseq::data

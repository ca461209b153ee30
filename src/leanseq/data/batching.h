// Parallel datasets, collation into padded tensors and token-based batching with length bucketing.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "leanseq/data/indexed.h"

namespace leanseq::data {

// One padded mini-batch. Source and target are right-padded with <pad>=1.
struct Batch {
  torch::Tensor src;          // [B, S] int64, each row ends with </s>
  torch::Tensor src_lengths;  // [B] int64, non-pad tokens incl. </s>
  torch::Tensor prev_output;  // [B, T] int64, [</s>, y1 .. y(n-1)] (empty when no target)
  torch::Tensor target;       // [B, T] int64, [y1 .. yn, </s>]
  std::vector<int64_t> ids;   // sentence indices in the dataset
  int64_t ntokens = 0;        // non-pad target tokens
  int64_t size() const { return static_cast<int64_t>(ids.size()); }
  Batch to(const torch::Device& device) const;
};

// Collates token-id sequences (each ending in </s>) into a Batch; with `decoder_input_is_source`
// (a language model's blocks, data/lm_blocks.h), each target's decoder input is its source row,
// as long as the target, instead of the target shifted right after </s>.
Batch collate(const std::vector<std::vector<int64_t>>& src, const std::vector<std::vector<int64_t>>& tgt,
              std::vector<int64_t> ids, bool decoder_input_is_source = false);

// A source/target pair of binarized datasets (target optional).
class PairDataset {
 public:
  // `decoder_input_is_source`: as collate's (then each source is as long as its target).
  PairDataset(const std::string& src_prefix, const std::optional<std::string>& tgt_prefix,
              bool decoder_input_is_source = false);
  size_t size() const { return src_.size(); }
  int64_t src_len(size_t i) const { return src_.length(i); }
  int64_t tgt_len(size_t i) const { return tgt_ ? tgt_->length(i) : 0; }
  // {src_len, tgt_len} of the first n pairs (all of them by default), as batch_by_size takes them.
  std::vector<std::pair<int64_t, int64_t>> lengths(size_t n = SIZE_MAX) const;
  bool has_target() const { return tgt_.has_value(); }
  Batch batch(const std::vector<int64_t>& ids) const;

 private:
  IndexedDataset src_;
  std::optional<IndexedDataset> tgt_;
  bool decoder_input_is_source_ = false;
};

struct BatchingOptions {
  int64_t max_tokens = 4096;     // padded tokens per batch: n * max(src_len, tgt_len)
  int64_t max_sentences = 0;     // 0: no limit
  int64_t required_multiple = 1; // batch sizes rounded down to a multiple of this when > it
  // Padded (source x target) grid cells per batch, n * max src_len * max tgt_len, for models whose
  // cost grows with the product of the lengths (0: no limit).
  int64_t max_cells = 0;
  // Pairs with more tokens (</s> included) are left out of the batches (0: no limit).
  int64_t max_source_len = 0, max_target_len = 0;
  bool too_long(const std::pair<int64_t, int64_t>& len) const {
    return (max_source_len > 0 && len.first > max_source_len) || (max_target_len > 0 && len.second > max_target_len);
  }
};

// Groups sentence indices of similar length into batches: indices are sorted by (target length,
// source length), then cut greedily so that each batch's padded size stays within max_tokens (and
// max_cells). `lengths[i]` is {src_len, tgt_len}. The order of batches is the sorted order;
// shuffle it with shuffle_batches. A pair alone over max_tokens or max_cells still gets a batch.
std::vector<std::vector<int64_t>> batch_by_size(const std::vector<std::pair<int64_t, int64_t>>& lengths,
                                                const BatchingOptions& opt);
void shuffle_batches(std::vector<std::vector<int64_t>>& batches, uint64_t seed);

// Padded positions of a list of batches: each batch is as long as its longest source (target),
// so a batch of n pairs holds n * max_len positions of which sum(len) are tokens.
struct Padding {
  int64_t src_tokens = 0, src_positions = 0, tgt_tokens = 0, tgt_positions = 0;
  double src_fraction() const { return src_positions ? 1.0 - static_cast<double>(src_tokens) / src_positions : 0.0; }
  double tgt_fraction() const { return tgt_positions ? 1.0 - static_cast<double>(tgt_tokens) / tgt_positions : 0.0; }
};
Padding padding_of(const std::vector<std::vector<int64_t>>& batches,
                   const std::vector<std::pair<int64_t, int64_t>>& lengths);

// The index of the first pair over opt's length limits, or -1.
int64_t first_too_long(const std::vector<std::pair<int64_t, int64_t>>& lengths, const BatchingOptions& opt);

}  // namespace leanseq::data

// A vocabulary shortlist (CTranslate2's "vocabulary map", Marian's lexical shortlist): for each
// source subword (or n-gram of them), the target subwords a translation of it may use, and the
// target subwords always allowed. A batch is searched over the union for its sources only, so the
// output layer computes the logits of a few thousand tokens instead of the whole vocabulary.
#pragma once
#include <torch/torch.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "leanseq/data/dictionary.h"

namespace leanseq::decode {

class Shortlist {
 public:
  // A file in CTranslate2's vmap format: each line a source n-gram (subwords separated by
  // spaces), a tab, and the target subwords it allows, separated by spaces; the line of the empty
  // source lists those always allowed. Subwords that `tgt` lacks are skipped (counted in
  // skipped()). DataError naming the file and line for a line without a tab.
  static Shortlist read(const std::string& path, const data::Dictionary& tgt);
  // The target ids a batch may use, ascending: the special tokens, those always allowed, those of
  // every source n-gram of `sources` (subwords), and `extra` (prefix and constraint tokens).
  torch::Tensor ids_for(const std::vector<std::vector<std::string>>& sources, const std::vector<int64_t>& extra) const;
  int64_t skipped() const { return skipped_; }
  int64_t entries() const;  // source n-grams with a list

 private:
  int64_t vocab_ = 0;
  std::vector<int64_t> fixed_;
  // per n-gram length - 1: the n-gram's text (its subwords joined by spaces) -> target ids
  std::vector<std::unordered_map<std::string, std::vector<int64_t>>> rules_;
  int64_t skipped_ = 0;
};

}  // namespace leanseq::decode

// Which target subwords translate which source subwords, from a parallel corpus of ids: the input
// of a vocabulary shortlist (decode/shortlist.h). Two estimates: IBM model 1 (EM over the sentence
// pairs with a NULL source, as fast_align starts), or alignment-free co-occurrence (p(t|s) = the
// share of the pairs holding s whose target holds t, as Marian's lexical tables without
// alignments).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace leanseq::data {

enum class LexicalMethod { ibm1, cooccurrence };

struct LexicalTable {
  // per source id: up to `best` (target id, probability), most likely first
  std::vector<std::vector<std::pair<int32_t, float>>> best;
  std::vector<int32_t> frequent;  // the most frequent target ids, most frequent first
};

// `src` and `tgt`: the pairs' ids (special ids below `first_symbol` are left out of both sides);
// `src_vocab`/`tgt_vocab` bound the ids. `iterations`: EM iterations of IBM model 1.
LexicalTable build_lexical_table(const std::vector<std::vector<int32_t>>& src, const std::vector<std::vector<int32_t>>& tgt,
                                 int64_t src_vocab, int64_t tgt_vocab, LexicalMethod method, int64_t best,
                                 int64_t frequent, int64_t iterations = 5, int32_t first_symbol = 4);

}  // namespace leanseq::data

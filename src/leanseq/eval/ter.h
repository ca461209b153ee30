// Translation Edit Rate with tercom's greedy block shifts, following sacreBLEU 2.x's TER
// (case-insensitive, no normalisation, no punctuation removal by default).
#pragma once
#include <string>
#include <vector>

namespace leanseq::eval {

struct TerOptions {
  bool case_sensitive = false;
};

struct TerScore {
  double score = 0;  // 100 * edits / average reference length
  double edits = 0, ref_length = 0;
  std::string format() const;  // what `leanseq score` prints
};

// refs[k][i] is the k-th reference of segment i. Per segment, the reference with the fewest edits
// counts, against the average reference length.
TerScore corpus_ter(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                    const TerOptions& opt = {});

// Edits (shifts + insertions, deletions, substitutions) turning `hyp` into `ref`.
double ter_edits(const std::vector<std::string>& hyp, const std::vector<std::string>& ref);

}  // namespace leanseq::eval

// Shared input check of the corpus metrics.
#pragma once
#include <string>
#include <vector>

#include "leanseq/core/error.h"

namespace leanseq::eval {

// refs[k][i] is the k-th reference of segment i: every stream must have one line per hypothesis.
inline void check_reference_streams(const std::vector<std::string>& hyps,
                                    const std::vector<std::vector<std::string>>& refs) {
  for (size_t k = 0; k < refs.size(); ++k) {
    if (refs[k].size() != hyps.size()) {
      throw DataError("reference stream " + std::to_string(k + 1) + " has " + std::to_string(refs[k].size()) +
                      " segments but the hypotheses have " + std::to_string(hyps.size()));
    }
  }
}

}  // namespace leanseq::eval

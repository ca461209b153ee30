#include "leanseq/core/range.h"

#include "leanseq/core/strings.h"

namespace leanseq {

std::string Range::text() const {
  const bool low = lo > -std::numeric_limits<double>::max(), high = hi < std::numeric_limits<double>::max();
  if (low && high) {
    return std::string(" in ") + (lo_open ? "(" : "[") + shortest_text(lo) + ", " + shortest_text(hi) + (hi_open ? ")" : "]");
  }
  if (low) return (lo_open ? " > " : " >= ") + shortest_text(lo);
  if (high) return (hi_open ? " < " : " <= ") + shortest_text(hi);
  return "";
}

}  // namespace leanseq

// The values a number option takes (a training key's, a decoding option's), and how messages
// say them.
#pragma once
#include <limits>
#include <string>

namespace leanseq {

// The values a number field takes: from lo to hi, each end included unless open. A float field is
// also always finite (NaN and infinities are refused). Without one, any finite value.
struct Range {
  double lo = -std::numeric_limits<double>::max();
  double hi = std::numeric_limits<double>::max();
  bool lo_open = false, hi_open = false;
  static Range at_least(double lo) { return {lo}; }
  static Range above(double lo) { return {lo, std::numeric_limits<double>::max(), true}; }
  static Range closed(double lo, double hi) { return {lo, hi}; }
  static Range half_open(double lo, double hi) { return {lo, hi, false, true}; }  // [lo, hi)
  static Range left_open(double lo, double hi) { return {lo, hi, true, false}; }  // (lo, hi]
  bool contains(double x) const {
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  }
  // " in [0, 1)", " > 0", " >= 1" ("" for any value).
  std::string text() const;
};
// A probability (dropout rates).
inline const Range kProbability = Range::closed(0, 1);

}  // namespace leanseq

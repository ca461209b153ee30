// The median the benchmark programs report (the mean of the two middle values for an even count).
#pragma once
#include <algorithm>
#include <vector>

namespace leanseq::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace leanseq::bench

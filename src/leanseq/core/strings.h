// Small string helpers shared across layers.
#pragma once
#include <string>

namespace leanseq {

// Replaces every occurrence of `from` (non-empty) in `s` by `to`, left to right.
inline void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
}

}  // namespace leanseq

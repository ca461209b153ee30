// Small string helpers shared across layers.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "leanseq/core/error.h"

namespace leanseq {

// Replaces every occurrence of `from` (non-empty) in `s` by `to`, left to right.
inline void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
}

// The shortest decimal text of `v` (printf's %g) that reads back as `v`.
inline std::string shortest_text(double v) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Words joined by single spaces (an empty word adds no space before the first non-empty one).
inline std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// The first line of an error message, cut to `max_bytes` (at a UTF-8 character's start, with
// "..." after it): a message quoting a user's value (a 10 MB "arch") stays one readable line.
inline std::string first_line(const std::string& s, size_t max_bytes = 1000) {
  std::string line = s.substr(0, s.find('\n'));
  if (line.size() <= max_bytes) return line;
  size_t keep = max_bytes;
  while (keep > 0 && (static_cast<unsigned char>(line[keep]) & 0xC0) == 0x80) --keep;
  return line.substr(0, keep) + "...";
}

// The paths of a colon-separated list ("a.pt:b.pt", fairseq's way for ensembles and data shards);
// ConfigError naming `key` for an empty one.
inline std::vector<std::string> colon_separated_paths(const std::string& spec, const std::string& key) {
  std::vector<std::string> paths;
  for (size_t from = 0;;) {
    const size_t colon = spec.find(':', from);
    paths.push_back(spec.substr(from, colon == std::string::npos ? std::string::npos : colon - from));
    if (paths.back().empty()) throw ConfigError(key + ": an empty path in '" + spec + "'");
    if (colon == std::string::npos) return paths;
    from = colon + 1;
  }
}

}  // namespace leanseq

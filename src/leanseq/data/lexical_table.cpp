#include "leanseq/data/lexical_table.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

namespace leanseq::data {

namespace {
using Pairs = std::unordered_map<uint64_t, float>;  // (source << 32 | target) -> value

uint64_t key(int32_t s, int32_t t) { return (static_cast<uint64_t>(static_cast<uint32_t>(s)) << 32) | static_cast<uint32_t>(t); }

// The distinct ids of a sentence at or above `first`.
std::vector<int32_t> distinct(const std::vector<int32_t>& ids, int32_t first) {
  std::vector<int32_t> out;
  for (int32_t id : ids) {
    if (id >= first) out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

constexpr int32_t kNull = 0;  // IBM model 1's empty source word (id 0 is <s>, never a source subword)
}  // namespace

LexicalTable build_lexical_table(const std::vector<std::vector<int32_t>>& src, const std::vector<std::vector<int32_t>>& tgt,
                                 int64_t src_vocab, int64_t tgt_vocab, LexicalMethod method, int64_t best,
                                 int64_t frequent, int64_t iterations, int32_t first_symbol) {
  if (src.size() != tgt.size()) throw std::invalid_argument("build_lexical_table: as many sources as targets");
  std::vector<int64_t> tgt_count(static_cast<size_t>(tgt_vocab), 0), src_pairs(static_cast<size_t>(src_vocab), 0);
  Pairs table;  // co-occurrence counts, then p(t|s)
  for (size_t i = 0; i < src.size(); ++i) {
    const auto s = distinct(src[i], first_symbol), t = distinct(tgt[i], first_symbol);
    for (int32_t id : tgt[i]) {
      if (id >= first_symbol && id < tgt_vocab) ++tgt_count[static_cast<size_t>(id)];
    }
    for (int32_t a : s) {
      if (a >= src_vocab) continue;
      ++src_pairs[static_cast<size_t>(a)];
      for (int32_t b : t) {
        if (b < tgt_vocab) table[key(a, b)] += 1.0f;
      }
    }
    if (method == LexicalMethod::ibm1) {
      for (int32_t b : t) table[key(kNull, b)] += 1.0f;
    }
  }
  if (method == LexicalMethod::cooccurrence) {
    for (auto& [k, v] : table) v /= static_cast<float>(src_pairs[static_cast<size_t>(k >> 32)]);
  } else {
    // IBM model 1: uniform p(t|s) over the pairs seen together, then EM.
    std::vector<float> totals(static_cast<size_t>(src_vocab), 0.0f);
    for (auto& [k, v] : table) totals[static_cast<size_t>(k >> 32)] += 1.0f;
    for (auto& [k, v] : table) v = 1.0f / totals[static_cast<size_t>(k >> 32)];
    for (int64_t it = 0; it < iterations; ++it) {
      Pairs counts;
      counts.reserve(table.size());
      std::fill(totals.begin(), totals.end(), 0.0f);
      for (size_t i = 0; i < src.size(); ++i) {
        std::vector<int32_t> s{kNull};
        for (int32_t a : src[i]) {
          if (a >= first_symbol && a < src_vocab) s.push_back(a);
        }
        std::vector<float> p(s.size());  // p(b|a) for each source word a of the sentence
        for (int32_t b : tgt[i]) {
          if (b < first_symbol || b >= tgt_vocab) continue;
          float z = 0.0f;
          for (size_t k = 0; k < s.size(); ++k) z += p[k] = table[key(s[k], b)];
          if (z <= 0.0f) continue;
          for (size_t k = 0; k < s.size(); ++k) {
            counts[key(s[k], b)] += p[k] / z;
            totals[static_cast<size_t>(s[k])] += p[k] / z;
          }
        }
      }
      for (auto& [k, v] : table) {
        const float total = totals[static_cast<size_t>(k >> 32)];
        const auto c = counts.find(k);
        v = total > 0.0f && c != counts.end() ? c->second / total : 0.0f;
      }
    }
  }
  LexicalTable out;
  out.best.resize(static_cast<size_t>(src_vocab));
  for (const auto& [k, v] : table) {
    const auto s = static_cast<int32_t>(k >> 32);
    if (s < first_symbol) continue;  // NULL
    out.best[static_cast<size_t>(s)].emplace_back(static_cast<int32_t>(k & 0xffffffffu), v);
  }
  auto better = [](const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  for (auto& list : out.best) {
    const auto keep = std::min<size_t>(list.size(), static_cast<size_t>(std::max<int64_t>(best, 0)));
    std::partial_sort(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(keep), list.end(), better);
    list.resize(keep);
  }
  std::vector<int32_t> order(static_cast<size_t>(tgt_vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return tgt_count[static_cast<size_t>(a)] > tgt_count[static_cast<size_t>(b)]; });
  for (int32_t id : order) {
    if (static_cast<int64_t>(out.frequent.size()) >= frequent || tgt_count[static_cast<size_t>(id)] == 0) break;
    out.frequent.push_back(id);
  }
  return out;
}

}  // namespace leanseq::data

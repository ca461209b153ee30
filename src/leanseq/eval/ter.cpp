#include "leanseq/eval/ter.h"

#include <cstdio>
#include <algorithm>
#include <map>
#include <tuple>

#include "leanseq/core/error.h"
#include "leanseq/eval/streams.h"
#include "leanseq/eval/unicode.h"

namespace leanseq::eval {
namespace {

constexpr int kMaxShiftSize = 10, kMaxShiftDist = 50, kMaxShiftCandidates = 1000;

enum Op : char { kNop, kSub, kIns, kDel };  // rewriting the hypothesis into the reference

using Words = std::vector<std::string>;

// Levenshtein distance from hyp to ref and the operations of one optimal path.
int edit_distance(const Words& h, const Words& r, std::vector<Op>* trace) {
  const size_t n = h.size(), m = r.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      int diag = d[i - 1][j - 1] + (h[i - 1] == r[j - 1] ? 0 : 1);
      d[i][j] = std::min({diag, d[i - 1][j] + 1, d[i][j - 1] + 1});
    }
  }
  if (trace) {
    trace->clear();
    size_t i = n, j = m;
    while (i > 0 || j > 0) {
      if (i > 0 && j > 0 && d[i][j] == d[i - 1][j - 1] + (h[i - 1] == r[j - 1] ? 0 : 1)) {
        trace->push_back(h[i - 1] == r[j - 1] ? kNop : kSub);
        --i, --j;
      } else if (i > 0 && d[i][j] == d[i - 1][j] + 1) {
        trace->push_back(kIns);  // a hypothesis word with no reference counterpart
        --i;
      } else {
        trace->push_back(kDel);  // a reference word missing from the hypothesis
        --j;
      }
    }
    std::reverse(trace->begin(), trace->end());
  }
  return d[n][m];
}

Words perform_shift(const Words& w, size_t start, size_t length, size_t target) {
  Words out;
  auto add = [&](size_t a, size_t b) { out.insert(out.end(), w.begin() + a, w.begin() + b); };
  if (target < start) {
    add(0, target), add(start, start + length), add(target, start), add(start + length, w.size());
  } else if (target > start + length) {
    add(0, start), add(start + length, target), add(start, start + length), add(target, w.size());
  } else {
    add(0, start), add(start + length, length + target), add(start, start + length), add(length + target, w.size());
  }
  return out;
}

// The best single block shift of `h` (tercom's ranking), or none when no shift lowers the edits.
bool best_shift(const Words& h, const Words& r, int& candidates, int& gain, Words& shifted) {
  std::vector<Op> trace;
  const int pre = edit_distance(h, r, &trace);
  std::map<int, int> align;  // reference position -> hypothesis position
  std::vector<int> hyp_err, ref_err;
  int ph = -1, pr = -1;
  for (Op op : trace) {
    if (op == kNop || op == kSub) {
      ++ph, ++pr;
      align[pr] = ph;
      hyp_err.push_back(op == kSub), ref_err.push_back(op == kSub);
    } else if (op == kIns) {
      ++ph;
      hyp_err.push_back(1);
    } else {
      ++pr;
      align[pr] = ph;
      ref_err.push_back(1);
    }
  }
  bool found = false;
  std::tuple<int, int, int, int> best_key;
  for (size_t sh = 0; sh < h.size() && candidates < kMaxShiftCandidates; ++sh) {
    for (size_t sr = 0; sr < r.size(); ++sr) {
      if (std::abs(static_cast<int>(sr) - static_cast<int>(sh)) > kMaxShiftDist) continue;
      for (size_t len = 1; len <= kMaxShiftSize && sh + len <= h.size() && sr + len <= r.size() &&
                           h[sh + len - 1] == r[sr + len - 1];
           ++len) {
        int herr = 0, rerr = 0;
        for (size_t k = sh; k < sh + len; ++k) herr += hyp_err[k];
        for (size_t k = sr; k < sr + len; ++k) rerr += ref_err[k];
        if (herr == 0 || rerr == 0) continue;
        int a = align.count(static_cast<int>(sr)) ? align[static_cast<int>(sr)] : -2;
        if (static_cast<int>(sh) <= a && a < static_cast<int>(sh + len)) continue;
        int prev_idx = -1;
        for (int offset = -1; offset < static_cast<int>(len); ++offset) {
          int idx;
          int pos = static_cast<int>(sr) + offset;
          if (pos == -1) {
            idx = 0;
          } else if (align.count(pos)) {
            idx = align[pos] + 1;
          } else {
            break;
          }
          if (idx == prev_idx) continue;
          prev_idx = idx;
          Words cand = perform_shift(h, sh, len, static_cast<size_t>(idx));
          auto key = std::make_tuple(pre - edit_distance(cand, r, nullptr), static_cast<int>(len), -static_cast<int>(sh), -idx);
          ++candidates;
          if (!found || key > best_key) {
            found = true;
            best_key = key;
            shifted = std::move(cand);
          }
        }
      }
    }
  }
  gain = found ? std::get<0>(best_key) : 0;
  return found;
}

}  // namespace

double ter_edits(const Words& hyp, const Words& ref) {
  Words h = hyp;
  int shifts = 0, candidates = 0;
  while (true) {
    int gain = 0;
    Words shifted;
    if (!best_shift(h, ref, candidates, gain, shifted)) break;
    if (candidates >= kMaxShiftCandidates || gain <= 0) break;
    ++shifts;
    h = std::move(shifted);
  }
  return shifts + edit_distance(h, ref, nullptr);
}

TerScore corpus_ter(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                    const TerOptions& opt) {
  check_reference_streams(hyps, refs);
  auto words = [&](const std::string& s) { return split_whitespace(opt.case_sensitive ? s : to_lower(s)); };
  TerScore out;
  for (size_t i = 0; i < hyps.size(); ++i) {
    auto h = words(hyps[i]);
    double best = -1, len_sum = 0;
    for (const auto& stream : refs) {
      auto r = words(stream[i]);
      len_sum += static_cast<double>(r.size());
      double e = ter_edits(h, r);
      if (best < 0 || e < best) best = e;
    }
    out.edits += std::max(best, 0.0);
    out.ref_length += refs.empty() ? 0 : len_sum / static_cast<double>(refs.size());
  }
  if (out.ref_length > 0) {
    out.score = 100 * out.edits / out.ref_length;
  } else {
    out.score = out.edits > 0 ? 100 : 0;
  }
  return out;
}

std::string TerScore::format() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "TER = %.2f (%.0f edits / %.1f reference words)", score, edits, ref_length);
  return buf;
}

}  // namespace leanseq::eval

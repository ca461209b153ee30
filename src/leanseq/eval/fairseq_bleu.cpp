#include "leanseq/eval/fairseq_bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>

#include "leanseq/core/error.h"

namespace leanseq::eval {

namespace {

constexpr int kPad = 1, kEos = 2, kUnk = 3, kNoMatch = -999;

// A pair's tokens as fairseq's dictionary ids (its special symbols first, the other words in the
// order met), </s> appended, trimmed as libbleu trims them.
struct Encoder {
  std::unordered_map<std::string, int> ids{{"<s>", 0}, {"<pad>", kPad}, {"</s>", kEos}, {"<unk>", kUnk}};
  std::vector<int> encode(const std::vector<std::string>& words, bool reference) {
    std::vector<int> out;
    for (const auto& w : words) out.push_back(ids.emplace(w, static_cast<int>(ids.size())).first->second);
    out.push_back(kEos);
    if (reference) std::replace(out.begin(), out.end(), kUnk, kNoMatch);  // a reference's <unk> matches nothing
    size_t start = 0;
    while (start < out.size() && out[start] == kPad) ++start;
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(start));
    size_t end = out.empty() ? 0 : out.size() - 1;
    while (end > 0 && (out[end] == kEos || out[end] == kPad)) --end;
    out.resize(out.empty() ? 0 : end + 1);
    return out;
  }
};

void add_ngrams(uint64_t& total, uint64_t& matched, size_t n, const std::vector<int>& ref, const std::vector<int>& hyp) {
  if (hyp.size() < n) return;
  total += hyp.size() - n + 1;
  if (ref.size() < n) return;
  std::map<std::vector<int>, uint64_t> counts;
  for (size_t i = 0; i + n <= hyp.size(); ++i) ++counts[std::vector<int>(hyp.begin() + i, hyp.begin() + i + n)];
  for (size_t i = 0; i + n <= ref.size(); ++i) {
    auto it = counts.find(std::vector<int>(ref.begin() + i, ref.begin() + i + n));
    if (it != counts.end() && it->second > 0) ++matched, --it->second;
  }
}

}  // namespace

FairseqBleu::FairseqBleu(bool one_init) {
  if (one_init) match_ = {0, 1, 1, 1}, count_ = {0, 1, 1, 1};
}

void FairseqBleu::add(const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  Encoder e;
  const auto r = e.encode(ref, true), h = e.encode(hyp, false);
  reflen_ += r.size();
  predlen_ += h.size();
  for (size_t n = 1; n <= 4; ++n) add_ngrams(count_[n - 1], match_[n - 1], n, r, h);
}

std::array<double, 4> FairseqBleu::precisions() const {
  std::array<double, 4> p{};
  for (size_t i = 0; i < 4; ++i) p[i] = count_[i] > 0 ? static_cast<double>(match_[i]) / static_cast<double>(count_[i]) : 0.0;
  return p;
}

double FairseqBleu::brevity() const {
  if (predlen_ == 0) return 0.0;  // (fairseq divides by zero)
  return std::min(1.0, std::exp(1.0 - static_cast<double>(reflen_) / static_cast<double>(predlen_)));
}

double FairseqBleu::score(int order) const {
  if (order < 1 || order > 4) throw ConfigError("BLEU order must be from 1 to 4, got " + std::to_string(order));
  const auto p = precisions();
  double sum = 0;
  for (int i = 0; i < order; ++i) sum += p[static_cast<size_t>(i)] > 0 ? std::log(p[static_cast<size_t>(i)]) : -std::numeric_limits<double>::infinity();
  return brevity() * std::exp(sum / order) * 100;
}

std::string FairseqBleu::result_string(int order) const {
  const double bleu = score(order);
  const auto p = precisions();
  std::string out = "BLEU" + std::to_string(order) + " = ";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%2.2f, ", bleu);
  out += buf;
  for (int i = 0; i < order; ++i) {
    std::snprintf(buf, sizeof buf, i == 0 ? "%2.1f" : "/%2.1f", p[static_cast<size_t>(i)] * 100);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, " (BP=%.3f, ratio=%.3f, syslen=%llu, reflen=%llu)", brevity(),
                reflen_ > 0 ? static_cast<double>(predlen_) / static_cast<double>(reflen_) : 0.0,
                static_cast<unsigned long long>(predlen_), static_cast<unsigned long long>(reflen_));
  return out + buf;
}

}  // namespace leanseq::eval

#include "leanseq/eval/bleu.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "leanseq/core/error.h"
#include "leanseq/eval/streams.h"
#include "leanseq/eval/unicode.h"

namespace leanseq::eval {

Smooth parse_smooth(const std::string& name) {
  if (name == "none") return Smooth::none;
  if (name == "floor") return Smooth::floor;
  if (name == "add-k") return Smooth::add_k;
  if (name == "exp") return Smooth::exp;
  throw ConfigError("unknown BLEU smoothing '" + name + "' (expected exp, floor, add-k or none)");
}

namespace {

using NgramCounts = std::map<std::string, int>;

NgramCounts count_ngrams(const std::vector<std::string>& words, int max_order) {
  NgramCounts counts;
  for (int n = 1; n <= max_order; ++n) {
    for (size_t i = 0; i + n <= words.size(); ++i) {
      std::string key = words[i];
      for (int k = 1; k < n; ++k) key += ' ' + words[i + k];
      ++counts[key];
    }
  }
  return counts;
}

int order_of(const std::string& ngram) {
  int n = 1;
  for (char c : ngram) n += c == ' ';
  return n;
}

std::string rstrip(const std::string& s) {
  std::u32string u = utf8_to_u32(s);
  while (!u.empty() && is_space(u.back())) u.pop_back();
  return u32_to_utf8(u);
}

std::string preprocess(const std::string& s, const BleuOptions& opt) {
  return tokenize(rstrip(opt.lowercase ? to_lower(s) : s), opt.tokenize);
}

double my_log(double x) { return x == 0 ? -9999999999.0 : std::log(x); }

}  // namespace

BleuStats segment_stats(const std::string& hyp, const std::vector<std::string>& refs,
                        int max_order) {
  BleuStats st;
  st.correct.assign(max_order, 0);
  st.total.assign(max_order, 0);
  auto hyp_words = split_whitespace(hyp);
  st.sys_len = static_cast<double>(hyp_words.size());
  NgramCounts ref_max;
  double closest_diff = -1, closest_len = 0;
  for (const auto& r : refs) {
    auto words = split_whitespace(r);
    double len = static_cast<double>(words.size());
    double diff = std::fabs(len - st.sys_len);
    if (closest_diff < 0 || diff < closest_diff) {
      closest_diff = diff, closest_len = len;
    } else if (diff == closest_diff && len < closest_len) {
      closest_len = len;
    }
    for (const auto& [ng, c] : count_ngrams(words, max_order)) {
      int& m = ref_max[ng];
      m = std::max(m, c);
    }
  }
  st.ref_len = closest_len;
  for (const auto& [ng, c] : count_ngrams(hyp_words, max_order)) {
    int n = order_of(ng);
    st.total[n - 1] += c;
    auto it = ref_max.find(ng);
    if (it != ref_max.end()) st.correct[n - 1] += std::min(c, it->second);
  }
  return st;
}

BleuScore bleu_from_stats(BleuStats stats, const BleuOptions& opt) {
  BleuScore out;
  const int N = opt.max_order;
  double smooth_value = opt.smooth_value;
  if (smooth_value < 0) smooth_value = opt.smooth == Smooth::floor ? 0.1 : 1.0;
  double sys_len = stats.sys_len, ref_len = stats.ref_len;
  out.bp = sys_len < ref_len ? (sys_len > 0 ? std::exp(1 - ref_len / sys_len) : 0.0) : 1.0;
  out.precisions.assign(N, 0.0);
  auto& correct = stats.correct;
  auto& total = stats.total;
  bool any = false;
  for (double c : correct) any = any || c != 0;
  if (!any) {
    out.score = 0;
    out.stats = stats;
    return out;
  }
  double smooth_mteval = 1.0;
  int eff_order = N;
  for (int n = 1; n <= N; ++n) {
    if (opt.smooth == Smooth::add_k && n > 1) {
      correct[n - 1] += smooth_value;
      total[n - 1] += smooth_value;
    }
    if (total[n - 1] == 0) break;
    if (opt.effective_order) eff_order = n;
    if (correct[n - 1] == 0) {
      if (opt.smooth == Smooth::exp) {
        smooth_mteval *= 2;
        out.precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1]);
      } else if (opt.smooth == Smooth::floor) {
        out.precisions[n - 1] = 100.0 * smooth_value / total[n - 1];
      }
    } else {
      out.precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1];
    }
  }
  double sum = 0;
  for (int n = 0; n < eff_order; ++n) sum += my_log(out.precisions[n]);
  out.score = out.bp * std::exp(sum / eff_order);
  out.stats = stats;
  return out;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs, const BleuOptions& opt) {
  check_reference_streams(hyps, refs);
  BleuStats total;
  total.correct.assign(opt.max_order, 0);
  total.total.assign(opt.max_order, 0);
  for (size_t i = 0; i < hyps.size(); ++i) {
    std::vector<std::string> seg_refs;
    for (const auto& stream : refs) seg_refs.push_back(preprocess(stream[i], opt));
    BleuStats s = segment_stats(preprocess(hyps[i], opt), seg_refs, opt.max_order);
    total.sys_len += s.sys_len;
    total.ref_len += s.ref_len;
    for (int n = 0; n < opt.max_order; ++n) {
      total.correct[n] += s.correct[n];
      total.total[n] += s.total[n];
    }
  }
  BleuScore out = bleu_from_stats(total, opt);
  static const char* smooth_names[] = {"none", "floor", "add-k", "exp"};
  out.signature = "nrefs:" + std::to_string(refs.size()) + "|case:" + (opt.lowercase ? "lc" : "mixed") +
                  "|eff:" + (opt.effective_order ? "yes" : "no") + "|tok:" + tokenize_name(opt.tokenize) +
                  "|smooth:" + smooth_names[static_cast<int>(opt.smooth)] + "|version:leanseq";
  return out;
}

BleuScore sentence_bleu(const std::string& hyp, const std::vector<std::string>& refs,
                        BleuOptions opt) {
  opt.effective_order = true;
  std::vector<std::vector<std::string>> streams;
  for (const auto& r : refs) streams.push_back({r});
  return corpus_bleu({hyp}, streams, opt);
}

std::string BleuScore::report() const { return format() + "  [" + signature + "]"; }

std::string BleuScore::format() const {
  char buf[256];
  std::string prec;
  for (size_t i = 0; i < precisions.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.1f", i ? "/" : "", precisions[i]);
    prec += buf;
  }
  double ratio = stats.ref_len > 0 ? stats.sys_len / stats.ref_len : 0;
  std::snprintf(buf, sizeof buf, "BLEU = %.2f %s (BP = %.3f ratio = %.3f hyp_len = %.0f ref_len = %.0f)",
                score, prec.c_str(), bp, ratio, stats.sys_len, stats.ref_len);
  return buf;
}

}  // namespace leanseq::eval

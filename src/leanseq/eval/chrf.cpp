#include "leanseq/eval/chrf.h"

#include <cstdio>
#include <map>

#include "leanseq/core/error.h"
#include "leanseq/eval/streams.h"
#include "leanseq/eval/unicode.h"

namespace leanseq::eval {
namespace {

using Counts = std::map<std::u32string, int>;

bool is_ascii_punct(char32_t c) {
  static const std::u32string p = U"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  return p.find(c) != std::u32string::npos;
}

// sacreBLEU's _remove_punctuation: split one leading or trailing punctuation mark off each word.
std::vector<std::u32string> word_tokens(const std::u32string& s) {
  std::vector<std::u32string> out;
  for (auto& w : split_whitespace(s)) {
    if (w.size() == 1) {
      out.push_back(w);
    } else if (is_ascii_punct(w.back())) {
      out.push_back(w.substr(0, w.size() - 1));
      out.push_back(w.substr(w.size() - 1));
    } else if (is_ascii_punct(w.front())) {
      out.push_back(w.substr(0, 1));
      out.push_back(w.substr(1));
    } else {
      out.push_back(w);
    }
  }
  return out;
}

std::vector<Counts> extract(const std::string& sent, const ChrfOptions& opt) {
  std::u32string s = utf8_to_u32(opt.lowercase ? to_lower(sent) : sent);
  std::vector<Counts> all;
  std::u32string chars;
  if (opt.whitespace) {
    chars = s;
  } else {
    for (auto& w : split_whitespace(s)) chars += w;
  }
  for (int n = 1; n <= opt.char_order; ++n) {
    Counts c;
    for (size_t i = 0; i + n <= chars.size(); ++i) ++c[chars.substr(i, n)];
    all.push_back(std::move(c));
  }
  if (opt.word_order > 0) {
    auto words = word_tokens(s);
    for (int n = 1; n <= opt.word_order; ++n) {
      Counts c;
      for (size_t i = 0; i + n <= words.size(); ++i) {
        std::u32string key = words[i];
        for (int k = 1; k < n; ++k) key += U' ' + words[i + k];
        ++c[key];
      }
      all.push_back(std::move(c));
    }
  }
  return all;
}

double f_score(const std::vector<double>& st, const ChrfOptions& opt) {
  const double eps = 1e-16;
  const double factor = opt.beta * opt.beta;
  const int order = opt.char_order + opt.word_order;
  double score = 0, avg_prec = 0, avg_rec = 0;
  int effective = 0;
  for (int i = 0; i < order; ++i) {
    double n_hyp = st[3 * i], n_ref = st[3 * i + 1], n_match = st[3 * i + 2];
    double prec = n_hyp > 0 ? n_match / n_hyp : eps;
    double rec = n_ref > 0 ? n_match / n_ref : eps;
    double denom = factor * prec + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) avg_prec += prec, avg_rec += rec, ++effective;
  }
  if (opt.eps_smoothing) return 100 * score / order;
  if (effective == 0) return 0;
  avg_prec /= effective;
  avg_rec /= effective;
  if (avg_prec + avg_rec == 0) return 0;
  return 100 * (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec);
}

std::vector<double> match_stats(const std::vector<Counts>& hyp, const std::vector<Counts>& ref) {
  std::vector<double> st;
  for (size_t i = 0; i < hyp.size(); ++i) {
    double h = 0, r = 0, m = 0;
    for (auto& [k, c] : hyp[i]) {
      h += c;
      auto it = ref[i].find(k);
      if (it != ref[i].end()) m += std::min(c, it->second);
    }
    for (auto& [k, c] : ref[i]) r += c;
    st.insert(st.end(), {h, r, m});
  }
  return st;
}

}  // namespace

ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs, const ChrfOptions& opt) {
  const int order = opt.char_order + opt.word_order;
  std::vector<double> total(3 * order, 0.0);
  check_reference_streams(hyps, refs);
  for (size_t i = 0; i < hyps.size(); ++i) {
    auto h = extract(hyps[i], opt);
    std::vector<double> best;
    double best_f = -1;
    for (const auto& stream : refs) {
      auto st = match_stats(h, extract(stream[i], opt));
      double f = f_score(st, opt);
      if (f > best_f) best_f = f, best = st;
    }
    for (size_t j = 0; j < best.size(); ++j) total[j] += best[j];
  }
  ChrfScore out;
  out.score = f_score(total, opt);
  out.stats = total;
  char beta[32];
  std::snprintf(beta, sizeof beta, "%g", opt.beta);
  out.name = std::string("chrF") + beta + (opt.word_order > 0 ? "++" : "");
  return out;
}

std::string ChrfScore::format() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s = %.2f", name.c_str(), score);
  return buf;
}

ChrfScore sentence_chrf(const std::string& hyp, const std::vector<std::string>& refs,
                        const ChrfOptions& opt) {
  std::vector<std::vector<std::string>> streams;
  for (const auto& r : refs) streams.push_back({r});
  return corpus_chrf({hyp}, streams, opt);
}

}  // namespace leanseq::eval

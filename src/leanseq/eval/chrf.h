// chrF and chrF++, identical to sacreBLEU 2.x's CHRF.
#pragma once
#include <string>
#include <vector>

namespace leanseq::eval {

struct ChrfOptions {
  int char_order = 6;
  int word_order = 0;  // 2 for chrF++
  double beta = 2;
  bool lowercase = false;
  bool whitespace = false;     // keep whitespace in character n-grams
  bool eps_smoothing = false;  // sacreBLEU's default is the effective-order average
};

struct ChrfScore {
  double score = 0;
  std::vector<double> stats;  // (hyp, ref, match) per order
  std::string name = "chrF2";  // chrF<beta>, "++" with word n-grams
  std::string format() const;  // "chrF2 = 57.54": what `leanseq score` prints
};

ChrfScore corpus_chrf(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs, const ChrfOptions& opt = {});
ChrfScore sentence_chrf(const std::string& hyp, const std::vector<std::string>& refs,
                        const ChrfOptions& opt = {});

}  // namespace leanseq::eval

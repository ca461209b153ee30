// Corpus and sentence BLEU, identical to sacreBLEU 2.x; plus fairseq-style tokenized BLEU.
#pragma once
#include <string>
#include <vector>

#include "leanseq/eval/tokenizers.h"

namespace leanseq::eval {

enum class Smooth { none, floor, add_k, exp };
Smooth parse_smooth(const std::string& name);  // "none" | "floor" | "add-k" | "exp"

struct BleuOptions {
  Tokenize tokenize = Tokenize::t13a;
  bool lowercase = false;
  Smooth smooth = Smooth::exp;
  double smooth_value = -1;  // < 0: sacreBLEU's default for the method (floor 0.1, add-k 1)
  int max_order = 4;
  bool effective_order = false;
};

struct BleuStats {
  std::vector<double> correct, total;  // per n-gram order
  double sys_len = 0, ref_len = 0;
};

struct BleuScore {
  double score = 0;                 // 0..100
  std::vector<double> precisions;   // 0..100 per order
  double bp = 0;
  BleuStats stats;
  std::string signature;            // sacreBLEU-style signature
  std::string format() const;       // "BLEU = 34.21 65.1/40.2/27.3/19.0 (BP = ...)"
  std::string report() const;       // format() and the signature: what `leanseq score` prints
};

// refs[k][i] is the k-th reference of segment i (sacreBLEU's reference streams).
BleuScore corpus_bleu(const std::vector<std::string>& hyps,
                      const std::vector<std::vector<std::string>>& refs,
                      const BleuOptions& opt = {});
BleuScore sentence_bleu(const std::string& hyp, const std::vector<std::string>& refs,
                        BleuOptions opt = {});
// sacreBLEU's compute_bleu from sufficient statistics.
BleuScore bleu_from_stats(BleuStats stats, const BleuOptions& opt);
// Statistics of one segment (already tokenized and whitespace-joined words).
BleuStats segment_stats(const std::string& hyp, const std::vector<std::string>& refs, int max_order);

}  // namespace leanseq::eval

// Corpus scores as `leanseq score` computes them: BLEU, chrF, chrF++ and TER as sacreBLEU 2.x,
// and fairseq's BLEU over whitespace tokens. Part of the stable API (docs/versioning.md).
#pragma once
#include <string>
#include <vector>

namespace leanseq {

struct ScoreOptions {
  std::string metric = "bleu";  // bleu, chrf, chrf++, ter or tok-bleu (whitespace tokens, no smoothing)
  std::string tokenize = "13a";  // BLEU's: 13a, intl, char or none
  bool lowercase = false;        // BLEU and chrF (TER ignores case unless case_sensitive)
  bool case_sensitive = false;   // TER's
};

struct CorpusScore {
  std::string metric;  // as asked
  double score = 0;    // 0..100 (TER: edits per 100 reference words)
  std::string text;    // the line `leanseq score` prints ("BLEU = 34.21 65.1/40.2/27.3/19.0 (BP = ...", signature)
  std::string json;    // the object `leanseq score --format json` prints
};

// `references[k][i]` is the k-th reference of hypothesis i (sacreBLEU's reference streams).
// ConfigError for an unknown metric or options it does not take, DataError for a reference stream
// that is not as long as the hypotheses.
CorpusScore score_corpus(const std::vector<std::string>& hypotheses,
                         const std::vector<std::vector<std::string>>& references, const ScoreOptions& options = {});

}  // namespace leanseq

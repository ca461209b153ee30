// leanseq::score_corpus (include/leanseq/metrics.h): the metric a name asks for, with its options.
#include <leanseq/metrics.h>

#include <nlohmann/json.hpp>

#include "leanseq/core/error.h"
#include "leanseq/eval/bleu.h"
#include "leanseq/eval/chrf.h"
#include "leanseq/eval/ter.h"

namespace leanseq {

CorpusScore score_corpus(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                         const ScoreOptions& options) {
  const auto& metric = options.metric;
  if (options.case_sensitive && metric != "ter") {
    throw ConfigError("--case-sensitive is TER's: the other metrics tell case apart unless --lowercase");
  }
  if (options.case_sensitive && options.lowercase) {
    throw ConfigError("--case-sensitive and --lowercase: give one of them");
  }
  for (size_t k = 0; k < refs.size(); ++k) {
    if (refs[k].size() != hyps.size()) {
      throw DataError("reference " + std::to_string(k + 1) + " has " + std::to_string(refs[k].size()) +
                      " lines but the hypotheses have " + std::to_string(hyps.size()));
    }
  }
  nlohmann::json out;
  CorpusScore result;
  result.metric = metric;
  if (metric == "bleu" || metric == "tok-bleu") {
    eval::BleuOptions o;
    o.tokenize = metric == "tok-bleu" ? eval::Tokenize::none : eval::parse_tokenize(options.tokenize);
    if (metric == "tok-bleu") o.smooth = eval::Smooth::none;
    o.lowercase = options.lowercase;
    const auto s = eval::corpus_bleu(hyps, refs, o);
    result.score = s.score;
    out = {{"metric", metric}, {"score", s.score}, {"precisions", s.precisions}, {"bp", s.bp},
           {"sys_len", s.stats.sys_len}, {"ref_len", s.stats.ref_len}, {"signature", s.signature}};
    result.text = (metric == "tok-bleu" ? "tokenized " : "") + s.report();
  } else if (metric == "chrf" || metric == "chrf++") {
    eval::ChrfOptions o;
    o.word_order = metric == "chrf++" ? 2 : 0;
    o.lowercase = options.lowercase;
    const auto s = eval::corpus_chrf(hyps, refs, o);
    result.score = s.score;
    out = {{"metric", metric}, {"score", s.score}};
    result.text = s.format();
  } else if (metric == "ter") {
    eval::TerOptions o;
    o.case_sensitive = options.case_sensitive;  // (lowercase is TER's default)
    const auto s = eval::corpus_ter(hyps, refs, o);
    result.score = s.score;
    out = {{"metric", "ter"}, {"score", s.score}, {"edits", s.edits}, {"ref_length", s.ref_length}};
    result.text = s.format();
  } else {
    throw ConfigError("--metric: unknown metric '" + metric + "' (expected bleu, chrf, chrf++, ter or tok-bleu)");
  }
  result.json = out.dump();
  return result;
}

}  // namespace leanseq

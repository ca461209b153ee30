// `leanseq translate`'s arguments and its run, shared with fairseq-interactive (cli/cmd_fairseq.cpp),
// which imports fairseq's checkpoints and translates as translate does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "leanseq/cli/decoding_options.h"
#include "leanseq/decode/translator.h"

namespace leanseq::cli {

enum class OutputFormat { text, fairseq };

struct TranslateArgs : DecodingFlags {
  std::string checkpoint, input = "-", output = "-", prefix_file;
  OutputFormat output_format = OutputFormat::text;
  bool interactive = false, scores = false, alignment = false;
  int64_t buffer_size = 1000;
};

// fairseq's H (score, subwords), D (score, the text when `detokenized`, else the subwords) and P
// (each token's log-probability, </s> last) lines of a sentence's hypotheses, and A (alignment
// pairs) with `alignment`. As fairseq's, the scores are in base 2.
std::string fairseq_hypothesis_lines(const std::vector<decode::TranslationHyp>& hyps, const std::string& id,
                                     bool detokenized, bool alignment);

// Translates a.input into a.output with the checkpoint(s) of a.checkpoint (A.pt:B.pt: an ensemble)
// and logs the speed; throws on errors (usage ones as ConfigError).
void run_translate(TranslateArgs& a);

}  // namespace leanseq::cli

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
  // Decoders sharing one copy of the weights (CTranslate2's inter_threads); 0: auto (cmd_translate.cpp).
  int64_t workers = 0;
  std::string post_process;  // fairseq's --post-process for --output-format fairseq ("": none)
};

// fairseq's line of subwords as fairseq-generate and -interactive print it: post-processed with
// fairseq's --post-process symbol (text::fairseq_post_process; "": as it is), then decoded by
// `detokenizer` (nullptr: not), which reads the result's space-separated words as its pieces.
std::string fairseq_line(const std::vector<std::string>& pieces, const std::string& post_process,
                         const data::TextPipeline* detokenizer);

// fairseq's H (score, subwords post-processed), D (score, those decoded by `detokenizer`, or the
// same as H without one) and P (each token's log-probability, </s> last) lines of a sentence's
// hypotheses, and A (alignment pairs) with `alignment`. As fairseq's, the scores are in base 2.
std::string fairseq_hypothesis_lines(const std::vector<decode::TranslationHyp>& hyps, const std::string& id,
                                     const data::TextPipeline* detokenizer, const std::string& post_process,
                                     bool alignment);

// Translates a.input into a.output with the checkpoint(s) of a.checkpoint (A.pt:B.pt: an ensemble)
// and logs the speed; throws on errors (usage ones as ConfigError).
void run_translate(TranslateArgs& a);

}  // namespace leanseq::cli

// `leanseq translate`'s arguments and its run, shared with fairseq-interactive (cli/cmd_fairseq.cpp),
// which imports fairseq's checkpoints and translates as translate does.
#pragma once
#include <cstdint>
#include <string>

#include "leanseq/cli/decoding_options.h"

namespace leanseq::cli {

enum class OutputFormat { text, fairseq };

struct TranslateArgs : DecodingFlags {
  std::string checkpoint, input = "-", output = "-", prefix_file;
  OutputFormat output_format = OutputFormat::text;
  bool interactive = false, scores = false, alignment = false;
  int64_t buffer_size = 1000;
};

// Translates a.input into a.output with the checkpoint(s) of a.checkpoint (A.pt:B.pt: an ensemble)
// and logs the speed; throws on errors (usage ones as ConfigError).
void run_translate(TranslateArgs& a);

}  // namespace leanseq::cli

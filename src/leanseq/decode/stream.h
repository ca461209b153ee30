// Translation of a stream of lines with memory bounded by a chunk, not by the input: lines are
// read into chunks of at most `buffer_size` (fewer when the input pauses: what has been read is
// translated at once), each chunk is batched by length and translated, and its results are handed
// on in input order. Empty lines and lines that are not valid UTF-8 are not translated; they are
// handed on with the reason, so that the output keeps one line per input line. With constraints
// (opt.search.constraint_order), a line is its source and a tab before each constraint, as
// fairseq-interactive reads it; a line whose constraints cannot be encoded is handed on so too.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "leanseq/core/line_reader.h"
#include "leanseq/decode/translator.h"

namespace leanseq::decode {

struct StreamItem {
  int64_t index = 0;                          // 0-based line number
  const std::string* line = nullptr;
  const std::string* source = nullptr;        // the line without its constraints
  const Constraints* constraints = nullptr;   // with opt.search.constraint_order: the line's
  const std::vector<TranslationHyp>* hyps = nullptr;  // nullptr when skipped
  std::string skipped;                        // why: "empty line", "invalid UTF-8", "an empty constraint"...
  double seconds = 0;  // its chunk's decoding time over the chunk's translated lines (fairseq-interactive's W)
};

// How a chunk's sources are translated, with Translator::translate's arguments (sources, options,
// stats, prefixes, constraints) and results: another way to run the translator (several workers).
using TranslateChunk = std::function<std::vector<std::vector<TranslationHyp>>(
    const std::vector<std::string>&, const TranslateOptions&, TranslationStats*, const std::vector<std::string>*,
    const std::vector<Constraints>*)>;

// Calls `emit` for every line in input order, and `chunk_done` after each chunk (to flush output
// and report progress). Returns the number of lines read.
// `prefixes`, when given, holds one target prefix per input line (fairseq's prefix_tokens), read in
// step with `in`; a missing line is a DataError naming the file. `translate_chunk`, when given,
// translates each chunk instead of translator.translate (`translator` still encodes constraints).
int64_t translate_stream(Translator& translator, const TranslateOptions& opt, io::LineReader& in, int64_t buffer_size,
                         const std::function<void(const StreamItem&)>& emit, TranslationStats* stats,
                         const std::function<void()>& chunk_done = {}, io::LineReader* prefixes = nullptr,
                         const TranslateChunk& translate_chunk = {});

}  // namespace leanseq::decode

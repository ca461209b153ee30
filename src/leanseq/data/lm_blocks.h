// The samples fairseq's language_modeling task cuts from a split (TokenBlockDataset with its
// targets, MonolingualDataset's "future" target, and fairseq-eval-lm's LMContextWindowDataset):
// blocks of the token stream, each with its input (the stream shifted right by one) and the
// tokens it predicts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace leanseq::data {

// --sample-break-mode: none (blocks of tokens_per_sample tokens across sentences), complete (whole
// sentences up to tokens_per_sample tokens; a longer sentence alone), eos (one sentence each).
enum class BreakMode { none, complete, eos };
// ConfigError naming `flag` for another name (complete_doc included: documents are not built).
BreakMode parse_break_mode(const std::string& name, const std::string& flag);

struct LmBlock {
  std::vector<int64_t> source;  // the input: the token before each target (</s> before a sentence's first)
  std::vector<int64_t> target;  // the tokens predicted, the last `target.size()` positions of source
  size_t context = 0;           // leading positions of source that are context only (--context-window)
};

// The blocks of `sentences` (each ending with </s> = `eos`, as fairseq-preprocess writes them), in
// order. With mode none or complete, tokens_per_sample must be positive.
std::vector<LmBlock> lm_blocks(const std::vector<std::vector<int64_t>>& sentences, int64_t tokens_per_sample,
                               BreakMode mode, int64_t eos);

// fairseq-eval-lm --context-window: each block, in order, is given the last tokens of the inputs
// before it as context, so that the block and its context hold at most
// tokens_per_sample + context_window tokens (the context is cut from its start to fit).
void add_context_window(std::vector<LmBlock>& blocks, int64_t context_window, int64_t tokens_per_sample);

}  // namespace leanseq::data

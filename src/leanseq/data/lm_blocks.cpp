#include "leanseq/data/lm_blocks.h"

#include <algorithm>

#include "leanseq/core/error.h"

namespace leanseq::data {

BreakMode parse_break_mode(const std::string& name, const std::string& flag) {
  if (name == "none") return BreakMode::none;
  if (name == "complete") return BreakMode::complete;
  if (name == "eos") return BreakMode::eos;
  throw ConfigError(flag + ": '" + name + "' is not none, complete or eos" +
                    (name == "complete_doc" ? " (documents separated by empty lines are not built)" : ""));
}

std::vector<LmBlock> lm_blocks(const std::vector<std::vector<int64_t>>& sentences, int64_t tokens_per_sample,
                               BreakMode mode, int64_t eos) {
  if (mode != BreakMode::eos && tokens_per_sample <= 0) throw ConfigError("--tokens-per-sample must be positive");
  // The stream and where each sentence starts in it.
  std::vector<int64_t> stream;
  std::vector<size_t> starts;
  for (const auto& s : sentences) {
    starts.push_back(stream.size());
    stream.insert(stream.end(), s.begin(), s.end());
  }
  std::vector<std::pair<size_t, size_t>> spans;  // [begin, end) of each block in the stream
  const auto size = static_cast<size_t>(std::max<int64_t>(tokens_per_sample, 0));
  if (mode == BreakMode::none) {
    for (size_t b = 0; b < stream.size(); b += size) spans.emplace_back(b, std::min(stream.size(), b + size));
  } else if (mode == BreakMode::eos) {
    for (size_t i = 0; i < sentences.size(); ++i) spans.emplace_back(starts[i], starts[i] + sentences[i].size());
  } else {  // complete: whole sentences while they fit; a block takes at least one
    size_t begin = 0, length = 0;
    for (const auto& s : sentences) {
      if (length > 0 && length + s.size() > size) {
        spans.emplace_back(begin, begin + length);
        begin += length;
        length = 0;
      }
      length += s.size();
    }
    if (length > 0) spans.emplace_back(begin, begin + length);
  }
  std::vector<LmBlock> out;
  out.reserve(spans.size());
  for (const auto& [b, e] : spans) {
    if (b == e) continue;
    LmBlock block;
    block.target.assign(stream.begin() + static_cast<std::ptrdiff_t>(b), stream.begin() + static_cast<std::ptrdiff_t>(e));
    // The input is the stream shifted right by one; a block that begins a sentence begins with </s>.
    const bool sentence_start = std::binary_search(starts.begin(), starts.end(), b);
    block.source.push_back(sentence_start ? eos : stream[b - 1]);
    block.source.insert(block.source.end(), block.target.begin(), block.target.end() - 1);
    out.push_back(std::move(block));
  }
  return out;
}

void add_context_window(std::vector<LmBlock>& blocks, int64_t context_window, int64_t tokens_per_sample) {
  if (context_window <= 0) return;
  const size_t window = static_cast<size_t>(context_window);
  const size_t longest = static_cast<size_t>(std::max<int64_t>(tokens_per_sample, 0)) + window;
  std::vector<int64_t> previous;  // the last inputs seen, at most `window`
  for (auto& block : blocks) {
    if (previous.size() + block.source.size() > longest) {
      const size_t extra = std::min(previous.size(), previous.size() + block.source.size() - longest);
      previous.erase(previous.begin(), previous.begin() + static_cast<std::ptrdiff_t>(extra));
    }
    block.context = previous.size();
    block.source.insert(block.source.begin(), previous.begin(), previous.end());
    const size_t keep = std::min(window, block.source.size());
    previous.assign(block.source.end() - static_cast<std::ptrdiff_t>(keep), block.source.end());
  }
}

}  // namespace leanseq::data

#include "leanseq/decode/stream.h"

#include <chrono>
#include <tuple>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"

namespace leanseq::decode {

int64_t translate_stream(Translator& translator, const TranslateOptions& opt, io::LineReader& in, int64_t buffer_size,
                         const std::function<void(const StreamItem&)>& emit, TranslationStats* stats,
                         const std::function<void()>& chunk_done, io::LineReader* prefixes,
                         const TranslateChunk& translate_chunk) {
  int64_t index = 0;
  bool more = true;
  std::vector<std::string> lines;
  while (more) {
    lines.clear();
    std::string line;
    // Block for the first line of a chunk only; after that, take what is there.
    while (static_cast<int64_t>(lines.size()) < buffer_size && (lines.empty() || in.ready())) {
      if (!in.next(line)) {
        more = false;
        break;
      }
      lines.push_back(std::move(line));
    }
    if (lines.empty()) break;
    const bool constrained = opt.search.constraint_order != ConstraintOrder::none;
    // With constraints, the sources without them (else the lines are the sources).
    std::vector<std::string> todo, todo_prefixes, sources(constrained ? lines.size() : 0), why(lines.size());
    std::vector<Constraints> constraints(lines.size()), todo_constraints;
    std::vector<size_t> where;
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string prefix;
      if (prefixes && !prefixes->next(prefix)) {
        throw DataError(prefixes->name() + ": has " + std::to_string(index + static_cast<int64_t>(i)) +
                        " lines, fewer than the input");
      }
      std::vector<std::string> texts;
      if (constrained) std::tie(sources[i], texts) = split_constraints(lines[i]);
      const std::string& source = constrained ? sources[i] : lines[i];
      const char* reason = nullptr;
      if (!translatable(source, &reason) || (constrained && !translatable(lines[i], &reason))) {
        why[i] = reason;
        continue;
      }
      if (constrained) {
        try {
          constraints[i] = translator.encode_constraints(texts, opt.input_format);
        } catch (const DataError& e) {
          why[i] = e.what();
          continue;
        }
        todo_constraints.push_back(constraints[i]);
      }
      where.push_back(i);
      todo.push_back(source);
      todo_prefixes.push_back(std::move(prefix));
    }
    const auto start = std::chrono::steady_clock::now();
    const auto* chunk_prefixes = prefixes ? &todo_prefixes : nullptr;
    const auto* chunk_constraints = constrained ? &todo_constraints : nullptr;
    const auto results = translate_chunk ? translate_chunk(todo, opt, stats, chunk_prefixes, chunk_constraints)
                                         : translator.translate(todo, opt, stats, chunk_prefixes, chunk_constraints);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    size_t k = 0;
    for (size_t i = 0; i < lines.size(); ++i, ++index) {
      StreamItem item;
      item.index = index;
      item.line = &lines[i];
      item.source = constrained ? &sources[i] : &lines[i];
      if (constrained) item.constraints = &constraints[i];
      if (k < where.size() && where[k] == i) {
        item.hyps = &results[k++];
        item.seconds = seconds / static_cast<double>(where.size());
      } else {
        item.skipped = why[i];
      }
      emit(item);
    }
    if (chunk_done) chunk_done();
  }
  return index;
}

}  // namespace leanseq::decode

// What a translation call takes besides its text: the search's options, how lines are read,
// batch sizes and the input length bound, with the one check of their ranges that the command
// line, the server and Python share.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "leanseq/decode/beam_search.h"
#include "leanseq/decode/shortlist.h"

namespace leanseq::decode {

// How input lines are read: raw text (the model's subword pipeline splits it) or subword tokens
// separated by spaces (as fairseq-generate reads binarized text; unknown ones become <unk>).
enum class InputFormat { raw, tokens };

struct TranslateOptions {
  SearchOptions search;
  InputFormat input_format = InputFormat::raw;
  std::string prefix;          // target text every translation starts with (fairseq's prefix_tokens)
  int64_t max_sentences = 64;  // sentences per batch
  // Padded source tokens per batch (0: no limit): a batch's memory grows with them times its
  // longest source, so a long line shares its batch with few others (with max_input_length's
  // 1024, at most 4 such lines a batch).
  int64_t max_tokens = kDefaultMaxTokens;
  static constexpr int64_t kDefaultMaxTokens = 4096;
  // Longer sources are cut to max_input_length subword tokens, </s> included (0: no limit), as
  // CTranslate2's max_input_length: no line can make a batch allocate without bound.
  int64_t max_input_length = kDefaultMaxInputLength;
  static constexpr int64_t kDefaultMaxInputLength = 1024;
  // fairseq's --replace-unk: each <unk> of a translation becomes the source subword it is aligned to
  // (the one it attends most), or that subword's entry in replace_unk_dict where it has one.
  bool replace_unk = false;
  std::shared_ptr<const std::unordered_map<std::string, std::string>> replace_unk_dict;
  // A vocabulary shortlist: each batch's translations use only the target tokens it allows for
  // the batch's sources (decode/shortlist.h); null: the whole vocabulary.
  std::shared_ptr<const Shortlist> shortlist;
};

// What a --replace-unk dictionary may hold: its bytes, its entries, a line's bytes.
struct ReplaceUnkLimits {
  uint64_t max_bytes = uint64_t{1} << 30;
  int64_t max_entries = 10'000'000;
  size_t max_line_bytes = size_t{1} << 16;
};

// A --replace-unk dictionary file as fairseq reads it: "source target" per line (more words are
// ignored; a later line of a source wins; blank lines are skipped). DataError naming the file and
// line for a line of one word, and for a file past `limits`.
std::unordered_map<std::string, std::string> read_replace_unk_dict(const std::string& path,
                                                                   const ReplaceUnkLimits& limits = {});

// ConfigError "<name>: expected <what it takes>, got <value>" for the first option out of the range
// decode/option_table.h declares for it, or for a combination the search cannot take (nbest past
// beam, top-k or top-p without sampling, constraints with sampling). Translator::translate checks
// its options so; every surface gives these messages.
void check_options(const TranslateOptions& opt);
constexpr int64_t kMaxBeam = 1024;
constexpr int64_t kMaxLenB = 1 << 16;

// A line of fairseq-interactive's --constraints input: the source, then each constraint after a
// tab. As fairseq, the line's white space at both ends is dropped first.
std::pair<std::string, std::vector<std::string>> split_constraints(const std::string& line);

// Whether a line can be translated: empty lines and lines that are not valid UTF-8 cannot (`why`
// says which); translate's output has an empty line for them, Python an empty result.
bool translatable(const std::string& line, const char** why = nullptr);

}  // namespace leanseq::decode

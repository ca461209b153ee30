// Which language a text is in, for LibreTranslate's /detect and source "auto": Google's Compact
// Language Detector 2 (Debian's libcld2), its answer restricted to the languages a server reads.
#pragma once
#include <string>
#include <vector>

namespace leanseq::serve {

struct LanguageGuess {
  std::string language;  // an ISO 639-1 code as the models' dictionaries name it ("de")
  double confidence;     // 0-100: the share of the text's letters CLD2 gives to it
};

// The languages among `allowed` that `text` (valid UTF-8) may be in, best first; always at least
// one: when CLD2 names none of them (too short a text, another language), the first of `allowed`
// with confidence 0 (LibreTranslate answers English with 0). Only the first kMaxDetectBytes bytes
// are read. `allowed` is not empty.
std::vector<LanguageGuess> identify_language(const std::string& text, const std::vector<std::string>& allowed);

// Bytes of a text identify_language reads at most (its time grows with them).
constexpr size_t kMaxDetectBytes = 4096;

}  // namespace leanseq::serve

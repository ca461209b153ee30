#include "leanseq/text/post_process.h"

#include "leanseq/core/error.h"
#include "leanseq/core/strings.h"

namespace leanseq::text {

namespace {

// Python's str.strip() for the whitespace a line of subwords can hold.
std::string python_strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Pieces joined, then `marker` as the space between words.
std::string words_marked_by(std::string sentence, const std::string& marker) {
  replace_all(sentence, " ", "");
  replace_all(sentence, marker, " ");
  return python_strip(sentence);
}

}  // namespace

const std::vector<std::string>& fairseq_post_process_symbols() {
  static const std::vector<std::string> symbols{"sentencepiece", "wordpiece", "letter", "silence", "_EOW",
                                                "subword_nmt",   "@@ ",       "@@",     "none"};
  return symbols;
}

std::string fairseq_post_process(const std::string& sentence, const std::string& symbol) {
  if (symbol == "sentencepiece") return words_marked_by(sentence, "\xe2\x96\x81");
  if (symbol == "wordpiece") return words_marked_by(sentence, "_");
  if (symbol == "letter") return words_marked_by(sentence, "|");
  if (symbol == "_EOW") return words_marked_by(sentence, "_EOW");
  if (symbol == "silence") {
    std::string kept = sentence, out;
    replace_all(kept, "<SIL>", "");
    for (char c : kept) {
      if (c != ' ' || out.empty() || out.back() != ' ') out += c;  // runs of spaces as one
    }
    return python_strip(out);
  }
  if (symbol == "subword_nmt" || symbol == "@@ " || symbol == "@@") {
    std::string out = sentence + " ";
    replace_all(out, symbol == "@@" ? "@@" : "@@ ", "");
    const auto end = out.find_last_not_of(" \t\n\r\f\v");
    return end == std::string::npos ? "" : out.substr(0, end + 1);
  }
  if (symbol == "none") return sentence;
  throw ConfigError("--post-process: fairseq knows no '" + symbol +
                    "' (sentencepiece, wordpiece, letter, silence, _EOW, subword_nmt, '@@ ', '@@' or none)");
}

}  // namespace leanseq::text

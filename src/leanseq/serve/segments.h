// Text cut into the parts a model translates and what is kept as it is around them: sentences
// (ICU's sentence rules, with the abbreviations of the text's language) with the spaces and line
// breaks between them, and the text of an HTML document between its markup (serve/html.h). A
// LibreTranslate request's text goes through these, so that a paragraph longer than a model takes
// translates sentence by sentence and comes back with its layout.
#pragma once
#include <string>
#include <vector>

namespace leanseq::serve {

struct Segments {
  // kept[i] comes before parts[i]; kept.back() after the last part (kept.size() == parts.size() + 1).
  std::vector<std::string> kept{""};
  std::vector<std::string> parts;

  void add(std::string before, std::string part);
  // The text again, with parts[i] replaced by translated[i] (as many as parts).
  std::string join(const std::vector<std::string>& translated) const;
};

// `text` (valid UTF-8) cut into sentences in the rules of `language` (an ISO 639 code; another
// name: the language-independent rules). Each part is a sentence without its surrounding white
// space; the white space and line breaks are kept. A text of white space only has no part.
Segments sentences_of(const std::string& text, const std::string& language);

// The number of Unicode code points of valid UTF-8 `s` (what LibreTranslate's limits count).
size_t code_points(const std::string& s);

}  // namespace leanseq::serve

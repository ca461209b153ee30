// The text of an HTML document or fragment, for format=html: parsed by an HTML5 parser (gumbo),
// the text between the tags is what is translated (entities decoded), and everything else (tags,
// attributes, comments, the text of <script>, <style>, <code>, <pre>, <textarea> and of elements
// marked translate="no" or class "notranslate") is kept as it was written, byte for byte.
#pragma once
#include <cstddef>
#include <string>

#include "leanseq/serve/segments.h"

namespace leanseq::serve {

// At most this many tags ('<') in a document: bounds the parser's tree and its depth.
constexpr size_t kMaxHtmlTags = 20000;

class HtmlText {
 public:
  // Refusal 400 for a document with more than kMaxHtmlTags tags. `html` is valid UTF-8.
  explicit HtmlText(const std::string& html);
  // The texts to translate, without the white space around them, entities decoded.
  const std::vector<std::string>& parts() const { return segments_.parts; }
  // The document again, with parts()[i] replaced by translated[i] (escaped: & < > as entities).
  std::string join(const std::vector<std::string>& translated) const;

 private:
  Segments segments_;
};

// `text` with &, < and > written as entities (and " in attributes' values: not needed here).
std::string html_escape(const std::string& text);

}  // namespace leanseq::serve

// The page `leanseq serve` answers GET / with: self-contained (no network), a text box and a button
// that POST to /v1/translate, the translation and its timing; /?q=text fills the box and translates
// on load.
#pragma once
#include <string>

namespace leanseq::serve {

std::string page_html(const std::string& model, const std::string& source_lang, const std::string& target_lang);

}  // namespace leanseq::serve

// The page `leanseq serve` answers GET / with: self-contained (no network), a text box and a button
// that POST to /v1/translate, the translation and its timing; /?q=text fills the box and translates
// on load. With several models, it translates with the one /?model=NAME names (the first one by
// default) and links to the others.
#pragma once
#include <string>
#include <vector>

#include "leanseq/serve/models.h"

namespace leanseq::serve {

std::string page_html(const std::vector<ModelInfo>& models, size_t selected);

}  // namespace leanseq::serve

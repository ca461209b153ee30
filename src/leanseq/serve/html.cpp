#include "leanseq/serve/html.h"

#include <gumbo.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "leanseq/serve/request.h"

namespace leanseq::serve {

namespace {

// Elements whose text is not prose, or is marked as not to be translated.
bool kept_whole(const GumboElement& e) {
  switch (e.tag) {
    case GUMBO_TAG_SCRIPT:
    case GUMBO_TAG_STYLE:
    case GUMBO_TAG_CODE:
    case GUMBO_TAG_PRE:
    case GUMBO_TAG_TEXTAREA:
    case GUMBO_TAG_NOSCRIPT:
      return true;
    default:
      break;
  }
  if (const GumboAttribute* t = gumbo_get_attribute(&e.attributes, "translate")) {
    if (strcasecmp(t->value, "no") == 0) return true;
  }
  if (const GumboAttribute* c = gumbo_get_attribute(&e.attributes, "class")) {
    std::string classes = std::string(" ") + c->value + " ";
    std::replace_if(classes.begin(), classes.end(), [](char ch) { return ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f'; }, ' ');
    if (classes.find(" notranslate ") != std::string::npos) return true;
  }
  return false;
}

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

struct Span {
  size_t begin, end;  // bytes of the source
  std::string text;   // decoded
};

}  // namespace

HtmlText::HtmlText(const std::string& html) {
  if (static_cast<size_t>(std::count(html.begin(), html.end(), '<')) > kMaxHtmlTags) {
    throw Refusal{400, "the HTML has more than " + std::to_string(kMaxHtmlTags) + " tags"};
  }
  std::unique_ptr<GumboOutput, void (*)(GumboOutput*)> out(
      gumbo_parse_with_options(&kGumboDefaultOptions, html.data(), html.size()),
      [](GumboOutput* o) { gumbo_destroy_output(&kGumboDefaultOptions, o); });
  // The text nodes outside kept elements, in document order (a stack, not recursion).
  std::vector<Span> spans;
  std::vector<const GumboNode*> stack{out->document};
  while (!stack.empty()) {
    const GumboNode* n = stack.back();
    stack.pop_back();
    if (n->type == GUMBO_NODE_TEXT) {
      const GumboText& t = n->v.text;
      const size_t begin = static_cast<size_t>(t.original_text.data - html.data());
      if (t.original_text.data >= html.data() && begin + t.original_text.length <= html.size()) {
        spans.push_back({begin, begin + t.original_text.length, t.text});
      }
      continue;
    }
    const GumboVector* children = nullptr;
    if (n->type == GUMBO_NODE_DOCUMENT) children = &n->v.document.children;
    if (n->type == GUMBO_NODE_ELEMENT || n->type == GUMBO_NODE_TEMPLATE) {
      if (kept_whole(n->v.element)) continue;
      children = &n->v.element.children;
    }
    if (!children) continue;
    for (size_t i = children->length; i-- > 0;) stack.push_back(static_cast<const GumboNode*>(children->data[i]));
  }
  // Source order; a span that overlaps the one before (not seen in practice) is left as written.
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  size_t at = 0;
  for (const auto& s : spans) {
    if (s.begin < at) continue;
    size_t b = 0, e = s.text.size();
    while (b < e && ascii_space(s.text[b])) ++b;
    while (e > b && ascii_space(s.text[e - 1])) --e;
    if (b == e) continue;  // white space only: kept as written
    segments_.add(html.substr(at, s.begin - at) + s.text.substr(0, b), s.text.substr(b, e - b));
    segments_.kept.back() = s.text.substr(e);
    at = s.end;
  }
  segments_.kept.back() += html.substr(at);
}

std::string HtmlText::join(const std::vector<std::string>& translated) const {
  std::vector<std::string> escaped;
  escaped.reserve(translated.size());
  for (const auto& t : translated) escaped.push_back(html_escape(t));
  return segments_.join(escaped);
}

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace leanseq::serve

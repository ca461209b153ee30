#include "leanseq/serve/segments.h"

#include <unicode/brkiter.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <map>
#include <memory>
#include <stdexcept>

namespace leanseq::serve {

void Segments::add(std::string before, std::string part) {
  kept.back() += before;
  parts.push_back(std::move(part));
  kept.emplace_back();
}

std::string Segments::join(const std::vector<std::string>& translated) const {
  if (translated.size() != parts.size()) throw std::logic_error("Segments::join: one translation per part");
  std::string out = kept[0];
  for (size_t i = 0; i < parts.size(); ++i) out += translated[i] + kept[i + 1];
  return out;
}

namespace {
// The sentence rules of `language`, made once per thread and language (making them takes about
// half a millisecond; the languages are those of the models served). "ss=standard": no break
// after the language's abbreviations ("Mr.", "z.B.") where ICU has them.
icu::BreakIterator* sentence_rules(const std::string& language) {
  thread_local std::map<std::string, std::unique_ptr<icu::BreakIterator>> made;
  const std::string key = language.size() <= 16 ? language : std::string();  // a code, or the root rules
  if (made.size() >= 64 && !made.count(key)) made.clear();  // bounded whatever the callers give
  auto& it = made[key];
  if (!it) {
    UErrorCode status = U_ZERO_ERROR;
    it.reset(icu::BreakIterator::createSentenceInstance(icu::Locale((key + "@ss=standard").c_str()), status));
    if (U_FAILURE(status) || !it) {
      made.erase(key);
      throw std::runtime_error(std::string("ICU's sentence rules: ") + u_errorName(status));
    }
  }
  return it.get();
}

std::string utf8(const icu::UnicodeString& u, int32_t begin, int32_t end) {
  std::string out;
  u.tempSubStringBetween(begin, end).toUTF8String(out);
  return out;
}
}  // namespace

Segments sentences_of(const std::string& text, const std::string& language) {
  Segments out;
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(text);
  icu::BreakIterator* it = sentence_rules(language);
  it->setText(u);
  int32_t start = it->first();
  for (int32_t end = it->next(); end != icu::BreakIterator::DONE; start = end, end = it->next()) {
    // The sentence without the white space around it (code points, not code units).
    int32_t b = start, e = end;
    while (b < e && u_isUWhiteSpace(u.char32At(b))) b = u.moveIndex32(b, 1);
    while (e > b && u_isUWhiteSpace(u.char32At(u.moveIndex32(e, -1)))) e = u.moveIndex32(e, -1);
    if (b == e) {
      out.kept.back() += utf8(u, start, end);
      continue;
    }
    out.add(utf8(u, start, b), utf8(u, b, e));
    out.kept.back() += utf8(u, e, end);
  }
  return out;
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace leanseq::serve

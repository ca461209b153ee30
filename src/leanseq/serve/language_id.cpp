#include "leanseq/serve/language_id.h"

#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>

#include <algorithm>

namespace leanseq::serve {

namespace {
// The text cut at a character boundary at most `limit` bytes in.
std::string prefix(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t n = limit;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

// CLD2's code for a language, as the models' dictionaries name it: "zh-Hant" -> "zh", "iw" -> "he".
std::string code_of(CLD2::Language l) {
  std::string code = CLD2::LanguageCode(l);
  const size_t dash = code.find('-');
  if (dash != std::string::npos) code = code.substr(0, dash);
  if (code == "iw") return "he";
  if (code == "jw") return "jv";
  return code;
}
}  // namespace

namespace {
// CLD2's top three for `t`, with `hint` boosted (UNKNOWN_LANGUAGE: none): (code, percent) pairs.
std::vector<std::pair<std::string, int>> top3(const std::string& t, CLD2::Language hint) {
  // (Left as they are when CLD2 returns early: a text it does not take as interchange UTF-8.)
  CLD2::Language language3[3] = {CLD2::UNKNOWN_LANGUAGE, CLD2::UNKNOWN_LANGUAGE, CLD2::UNKNOWN_LANGUAGE};
  int percent3[3] = {0, 0, 0};
  double scores3[3] = {0, 0, 0};
  int text_bytes = 0;
  bool reliable = false;
  int valid_bytes = 0;
  const CLD2::CLDHints hints{nullptr, nullptr, CLD2::UNKNOWN_ENCODING, hint};
  CLD2::ExtDetectLanguageSummaryCheckUTF8(t.data(), static_cast<int>(t.size()), true, &hints,
                                          CLD2::kCLDFlagBestEffort, language3, percent3, scores3, nullptr,
                                          &text_bytes, &reliable, &valid_bytes);
  std::vector<std::pair<std::string, int>> out;
  for (int i = 0; i < 3; ++i) {
    if (language3[i] != CLD2::UNKNOWN_LANGUAGE && percent3[i] > 0) out.emplace_back(code_of(language3[i]), percent3[i]);
  }
  return out;
}

// Candidates hinted one at a time, at most this many (the time grows with them).
constexpr size_t kMaxHinted = 8;
}  // namespace

std::vector<LanguageGuess> identify_language(const std::string& text, const std::vector<std::string>& allowed) {
  // Control characters (which CLD2 refuses the whole text for) read as spaces.
  std::string t = prefix(text, kMaxDetectBytes);
  for (char& c : t) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == 0x7f) c = ' ';
  }
  auto is_allowed = [&](const std::string& code) { return std::find(allowed.begin(), allowed.end(), code) != allowed.end(); };
  std::vector<LanguageGuess> out;
  auto add = [&](const std::string& code, int percent) {
    if (!is_allowed(code)) return;
    if (std::any_of(out.begin(), out.end(), [&](const LanguageGuess& g) { return g.language == code; })) return;
    out.push_back({code, static_cast<double>(percent)});
  };
  for (const auto& [code, percent] : top3(t, CLD2::UNKNOWN_LANGUAGE)) add(code, percent);
  if (out.empty() && allowed.size() > 1) {
    // CLD2 named none of them (a neighbour: Portuguese for Spanish, Dutch for German): each
    // candidate is hinted in turn, and the one CLD2 then gives most of the text wins, at half
    // its share (a hinted answer is a weaker one).
    std::string best;
    int best_percent = 0;
    for (size_t i = 0; i < std::min(allowed.size(), kMaxHinted); ++i) {
      const CLD2::Language hint = CLD2::GetLanguageFromName(allowed[i].c_str());
      if (hint == CLD2::UNKNOWN_LANGUAGE) continue;
      for (const auto& [code, percent] : top3(t, hint)) {
        if (code == allowed[i] && percent > best_percent) {
          best = code;
          best_percent = percent;
        }
      }
    }
    if (!best.empty()) out.push_back({best, best_percent / 2.0});
  }
  if (out.empty()) out.push_back({allowed.front(), 0.0});
  return out;
}

}  // namespace leanseq::serve

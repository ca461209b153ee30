#include "leanseq/eval/unicode.h"

#include <unicode/uchar.h>

namespace leanseq::eval {

std::u32string utf8_to_u32(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    char32_t cp;
    size_t len;
    if (c < 0x80) {
      cp = c, len = 1;
    } else if ((c & 0xE0) == 0xC0) {
      cp = c & 0x1F, len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      cp = c & 0x0F, len = 3;
    } else {
      cp = c & 0x07, len = 4;
    }
    for (size_t k = 1; k < len && i + k < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string u32_to_utf8(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

bool is_space(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return true;
  if (c < 0x80) return false;
  if (u_charType(c) == U_SPACE_SEPARATOR) return true;
  auto bidi = u_charDirection(c);
  return bidi == U_WHITE_SPACE_NEUTRAL || bidi == U_BLOCK_SEPARATOR || bidi == U_SEGMENT_SEPARATOR;
}

std::vector<std::u32string> split_whitespace(const std::u32string& s) {
  std::vector<std::u32string> out;
  std::u32string cur;
  for (char32_t c : s) {
    if (is_space(c)) {
      if (!cur.empty()) out.push_back(std::move(cur)), cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::vector<std::string> split_whitespace(const std::string& s) {
  std::vector<std::string> out;
  for (auto& w : split_whitespace(utf8_to_u32(s))) out.push_back(u32_to_utf8(w));
  return out;
}

std::string to_lower(const std::string& s) {
  std::u32string u = utf8_to_u32(s);
  for (auto& c : u) c = static_cast<char32_t>(u_tolower(static_cast<UChar32>(c)));
  return u32_to_utf8(u);
}

bool is_number(char32_t c) { return U_GET_GC_MASK(c) & U_GC_N_MASK; }
bool is_punctuation(char32_t c) { return U_GET_GC_MASK(c) & U_GC_P_MASK; }
bool is_symbol(char32_t c) { return U_GET_GC_MASK(c) & U_GC_S_MASK; }

}  // namespace leanseq::eval

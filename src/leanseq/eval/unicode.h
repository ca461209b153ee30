// Code-point level helpers (ICU-backed) shared by the metrics' tokenizers.
#pragma once
#include <string>
#include <vector>

namespace leanseq::eval {

std::u32string utf8_to_u32(const std::string& s);
std::string u32_to_utf8(const std::u32string& s);

// Python's str.isspace(): Unicode whitespace (Zs, and bidi classes WS, B, S).
bool is_space(char32_t c);
// Python's str.split() with no argument.
std::vector<std::u32string> split_whitespace(const std::u32string& s);
std::vector<std::string> split_whitespace(const std::string& s);
// Python's str.lower() (per code point simple mapping).
std::string to_lower(const std::string& s);

bool is_number(char32_t c);       // \p{N}
bool is_punctuation(char32_t c);  // \p{P}
bool is_symbol(char32_t c);       // \p{S}

}  // namespace leanseq::eval

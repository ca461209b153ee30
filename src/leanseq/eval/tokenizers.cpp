#include "leanseq/eval/tokenizers.h"

#include "leanseq/core/error.h"
#include "leanseq/core/strings.h"
#include "leanseq/eval/unicode.h"

namespace leanseq::eval {

Tokenize parse_tokenize(const std::string& name) {
  if (name == "none") return Tokenize::none;
  if (name == "13a") return Tokenize::t13a;
  if (name == "intl") return Tokenize::intl;
  if (name == "char") return Tokenize::chars;
  throw ConfigError("unknown tokenizer '" + name + "' (expected 13a, intl, char or none)");
}

std::string tokenize_name(Tokenize t) {
  switch (t) {
    case Tokenize::none: return "none";
    case Tokenize::t13a: return "13a";
    case Tokenize::intl: return "intl";
    case Tokenize::chars: return "char";
  }
  return "?";
}

namespace {


std::string join_words(const std::string& s) {
  std::string out;
  for (const auto& w : split_whitespace(s)) {
    if (!out.empty()) out.push_back(' ');
    out += w;
  }
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The characters mteval-v13a pads with spaces: {|}~ [\]^_` space!"#$%& ()*+ :;<=>?@ /
bool is_13a_symbol(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u >= '{' && u <= '~') || (u >= '[' && u <= '`') || (u >= ' ' && u <= '&') ||
         (u >= '(' && u <= '+') || (u >= ':' && u <= '@') || u == '/';
}

}  // namespace

std::string tokenize_13a(const std::string& input) {
  std::string line = input;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";
  // Each pass below is one left-to-right, non-overlapping regex substitution of mteval-v13a.
  std::string a;
  for (char c : line) {  // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 "
    if (is_13a_symbol(c)) {
      a += ' ', a += c, a += ' ';
    } else {
      a += c;
    }
  }
  std::string b;
  for (size_t i = 0; i < a.size();) {  // ([^0-9])([\.,]) -> "\1 \2 "
    if (i + 1 < a.size() && !is_digit(a[i]) && (a[i + 1] == '.' || a[i + 1] == ',')) {
      b += a[i], b += ' ', b += a[i + 1], b += ' ', i += 2;
    } else {
      b += a[i++];
    }
  }
  std::string c;
  for (size_t i = 0; i < b.size();) {  // ([\.,])([^0-9]) -> " \1 \2"
    if (i + 1 < b.size() && (b[i] == '.' || b[i] == ',') && !is_digit(b[i + 1])) {
      c += ' ', c += b[i], c += ' ', c += b[i + 1], i += 2;
    } else {
      c += b[i++];
    }
  }
  std::string d;
  for (size_t i = 0; i < c.size();) {  // ([0-9])(-) -> "\1 \2 "
    if (i + 1 < c.size() && is_digit(c[i]) && c[i + 1] == '-') {
      d += c[i], d += ' ', d += '-', d += ' ', i += 2;
    } else {
      d += c[i++];
    }
  }
  return join_words(d);
}

std::string tokenize_intl(const std::string& input) {
  std::u32string s = utf8_to_u32(input);
  std::u32string a;
  for (size_t i = 0; i < s.size();) {  // (\P{N})(\p{P}) -> "\1 \2 "
    if (i + 1 < s.size() && !is_number(s[i]) && is_punctuation(s[i + 1])) {
      a += s[i], a += U' ', a += s[i + 1], a += U' ', i += 2;
    } else {
      a += s[i++];
    }
  }
  std::u32string b;
  for (size_t i = 0; i < a.size();) {  // (\p{P})(\P{N}) -> " \1 \2"
    if (i + 1 < a.size() && is_punctuation(a[i]) && !is_number(a[i + 1])) {
      b += U' ', b += a[i], b += U' ', b += a[i + 1], i += 2;
    } else {
      b += a[i++];
    }
  }
  std::u32string c;
  for (char32_t ch : b) {  // (\p{S}) -> " \1 "
    if (is_symbol(ch)) {
      c += U' ', c += ch, c += U' ';
    } else {
      c += ch;
    }
  }
  return join_words(u32_to_utf8(c));
}

std::string tokenize_char(const std::string& line) {
  std::u32string s = utf8_to_u32(line), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += U' ';
    out += s[i];
  }
  return u32_to_utf8(out);
}

std::string tokenize(const std::string& line, Tokenize t) {
  switch (t) {
    case Tokenize::none: return line;
    case Tokenize::t13a: return tokenize_13a(line);
    case Tokenize::intl: return tokenize_intl(line);
    case Tokenize::chars: return tokenize_char(line);
  }
  return line;
}

}  // namespace leanseq::eval

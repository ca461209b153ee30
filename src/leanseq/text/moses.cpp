#include "leanseq/text/moses.h"

#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>

#include <map>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/strings.h"
#include "leanseq/text/moses_prefixes.h"

namespace leanseq::text {

namespace {

using icu::UnicodeString;

// The Moses classes as sacremoses has them (its perluniprops tables, for use inside [...]): letters
// and digits of the Basic Multilingual Plane, without the unified and compatibility ideographs and the
// Hangul syllables, which the tables lack; zh, ja and ko add their scripts' characters (sacremoses'
// Han, Hiragana + Katakana + Han, Hangul: Script_Extensions, so also their punctuation like "。").
std::string moses_class(const std::string& base, const std::string& lang) {
  std::string c = "[[" + base +
                  "]--[\\x{3400}-\\x{4DBF}\\x{4E00}-\\x{9FFF}\\x{AC00}-\\x{D7A3}\\x{F900}-\\x{FAFF}"
                  "\\x{10000}-\\x{10FFFF}]]";
  if (lang == "zh") c += "\\p{scx=Hani}";
  if (lang == "ja") c += "\\p{scx=Hira}\\p{scx=Kana}\\p{scx=Hani}";
  if (lang == "ko") c += "\\p{scx=Hang}";
  return c;
}
std::string alnum_class(const std::string& lang) { return moses_class("\\p{Alphabetic}\\p{Nd}", lang); }
std::string alpha_class(const std::string& lang) { return moses_class("\\p{Alphabetic}", lang); }
const char* const kNumber = "\\p{N}";
constexpr uint64_t kMaxNonbreakingPrefixBytes = uint64_t{16} << 20;

// One substitution: every match of `pattern` replaced by `replacement` ($1: the first group).
class Substitution {
 public:
  Substitution(const std::string& pattern, const std::string& replacement)
      : replacement_(UnicodeString::fromUTF8(replacement)) {
    UErrorCode status = U_ZERO_ERROR;
    UParseError where;
    pattern_.reset(icu::RegexPattern::compile(UnicodeString::fromUTF8(pattern), where, status));
    if (U_FAILURE(status)) throw Error("Moses rule '" + pattern + "' does not compile: " + u_errorName(status));
  }
  UnicodeString apply(const UnicodeString& text) const {
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> m(pattern_->matcher(text, status));
    UnicodeString out = m->replaceAll(replacement_, status);
    if (U_FAILURE(status)) throw Error(std::string("a Moses rule failed: ") + u_errorName(status));
    return out;
  }
  // Every match [start, end) replaced by what `replace(start, end, out)` appends to `out`.
  template <class Replace>
  UnicodeString apply_each(const UnicodeString& text, Replace&& replace) const {
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> m(pattern_->matcher(text, status));
    UnicodeString out;
    int32_t copied = 0;
    while (U_SUCCESS(status) && m->find(status)) {
      const int32_t start = m->start(status), end = m->end(status);
      out.append(text, copied, start - copied);
      replace(start, end, out);
      copied = end;
    }
    if (U_FAILURE(status)) throw Error(std::string("a Moses rule failed: ") + u_errorName(status));
    return out.append(text, copied, text.length() - copied);
  }

 private:
  std::unique_ptr<icu::RegexPattern> pattern_;
  UnicodeString replacement_;
};

// sacremoses keeps each run of dots from the rules that follow by turning one dot of it per pass
// over the line until none is left ("DOTMULTI\.([^\.])" -> "DOTDOTMULTI \1", then "DOTMULTI\." ->
// "DOTDOTMULTI"): a line of n dots took n passes (19 s for 10 000 dots). The same result in one
// pass over the matches of `runs` ("DOTMULTI(\.+)"): "DOTMULTI" and m dots become "DOT" m times and
// "DOTMULTI", then a space when a character follows; except in the one case where the loop's first
// rule never sees a run: a run of one dot right after another run of one dot that rule took, with
// this run's "D" as the character after it.
UnicodeString protect_dot_runs(const Substitution& runs, const UnicodeString& text) {
  int32_t previous_end = -1, previous_dots = 0;
  bool previous_spaced = false;
  return runs.apply_each(text, [&](int32_t start, int32_t end, UnicodeString& out) {
    const int32_t dots = end - start - 8;  // after "DOTMULTI"
    const bool spaced = end < text.length() &&
                        !(start == previous_end && previous_spaced && previous_dots == 1 && dots == 1);
    for (int32_t k = 0; k < dots; ++k) out.append(u"DOT");
    out.append(u"DOTMULTI");
    if (spaced) out.append(char16_t(' '));
    previous_end = end, previous_dots = dots, previous_spaced = spaced;
  });
}

// The way back, one pass over the matches of `marks` ("(?:DOT)+MULTI") too: sacremoses turns
// "DOTDOTMULTI" into "DOTMULTI." until none is left, then each "DOTMULTI" into ".", so "DOT" n times
// and "MULTI" become n dots.
UnicodeString restore_dot_runs(const Substitution& marks, const UnicodeString& text) {
  return marks.apply_each(text, [](int32_t start, int32_t end, UnicodeString& out) {
    for (int32_t k = 0; k < (end - start - 5) / 3; ++k) out.append(char16_t('.'));
  });
}

std::string utf8(const UnicodeString& s) {
  std::string out;
  s.toUTF8String(out);
  return out;
}

std::vector<std::string> split_spaces(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The first code point of a UTF-8 string (0 when empty).
UChar32 first_code_point(const std::string& s) {
  if (s.empty()) return 0;
  return UnicodeString::fromUTF8(s).char32At(0);
}

// Abbreviations after which a period does not end a sentence, as sacremoses' lists for English and
// German hold them (fairseq's models were trained on its output), its quirks included (German keeps
// "Hr" out and every number from 1 to 99 in). An entry with #NUMERIC_ONLY counts only before a number.
// Titles both lists share:
const char* const kTitles =
    "Adj Adm Adv Asst Bart Bldg Brig Bros Capt Cmdr Col Comdr Con Corp Cpl DR Dr Ens Gen Gov Hon Hosp Insp Lt MM MR "
    "MRS MS Maj Messrs Mlle Mme Mr Mrs Ms Msgr Op Ord Pfc Ph Prof Pvt Rep Reps Res Rev Rt Sen Sens Sfc Sgt Sr St "
    "Supt Surg";
// English beyond the titles and the capital letters:
const char* const kPrefixesEn =
    "Drs Hr v vs i.e rev e.g Rs No#NUMERIC_ONLY Nos Art#NUMERIC_ONLY Nr pp#NUMERIC_ONLY "
    "Jan Feb Mar Apr Jun Jul Aug Sep Oct Nov Dec";
// German beyond the titles, the letters, the Roman numerals to XX (both cases) and the numbers to 99:
const char* const kPrefixesDe =
    "Mio Mrd bzw vs usw d.h z.B u.a etc MwSt ggf d.J D.h m.E vgl I.F z.T sogen ff u.E g.U g.g.A c.-\u00e0-d "
    "Buchst u.s.w sog u.\u00e4 Std evtl Zt Chr u.U o.\u00e4 Ltd b.A z.Zt spp sen SA k.o jun i.H.v dgl dergl Co "
    "zzt usf s.p.a Dkr bzgl BSE No Nos Art Nr pp ca Ca";

std::string roman(int n) {
  static const char* const tens[] = {"", "X", "XX"};
  static const char* const ones[] = {"", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX"};
  return std::string(tens[n / 10]) + ones[n % 10];
}

// The built-in list of `lang` (en and de built here; cs, es, fr, it, pt, ro, ru generated from
// sacremoses' files; others have none), entries as a nonbreaking_prefix file's lines.
std::vector<std::string> builtin_prefixes(const std::string& lang) {
  std::vector<std::string> out;
  if (const char* list = moses_prefix_list(lang)) return io::split_lines(list, "the built-in " + lang + " prefixes");
  if (lang != "en" && lang != "de") return out;
  for (char c = 'A'; c <= 'Z'; ++c) out.emplace_back(1, c);
  for (const auto& w : split_spaces(kTitles)) out.push_back(w);
  if (lang == "en") {
    for (const auto& w : split_spaces(kPrefixesEn)) {
      const auto mark = w.find("#NUMERIC_ONLY");
      out.push_back(mark == std::string::npos ? w : w.substr(0, mark) + " #NUMERIC_ONLY#");
    }
    return out;
  }
  for (char c = 'a'; c <= 'z'; ++c) out.emplace_back(1, c);
  for (int n = 1; n <= 20; ++n) {
    out.push_back(roman(n));
    std::string lower = roman(n);
    for (auto& ch : lower) ch = static_cast<char>(ch - 'A' + 'a');
    out.push_back(lower);
  }
  for (int n = 1; n <= 99; ++n) out.push_back(std::to_string(n));
  for (const auto& w : split_spaces(kPrefixesDe)) out.push_back(w);
  return out;
}

}  // namespace

struct MosesTokenizer::Rules {
  std::vector<Substitution> start, comma, apostrophe, escape;
  icu::UnicodeSet alpha;  // the language's Moses letters (the any-letter test of nonbreaking prefixes)
  Substitution pad_not_alnum, dash, multidot, dot_runs, spaces, junk, trim, trailing_dot_apostrophe, dot_marks;
  Rules(const std::string& lang, bool aggressive)
      : pad_not_alnum("([^" + alnum_class(lang) + "\\s\\.'`,\\-])", " $1 "),
        dash("([" + alnum_class(lang) + "])\\-(?=[" + alnum_class(lang) + "])", "$1 @-@ "),
        multidot("\\.([\\.]+)", " DOTMULTI$1"),
        dot_runs("DOTMULTI(\\.+)", ""),
        spaces("\\s+", " "),
        junk("[\\x00-\\x1f]", ""),
        trim("^\\s+|\\s+$", ""),
        trailing_dot_apostrophe("\\.' ?$", " . ' "),
        dot_marks("(?:DOT)+MULTI", "") {
    (void)aggressive;
    UErrorCode status = U_ZERO_ERROR;
    std::string set = "[" + alpha_class(lang) + "]";
    set.replace(set.find("]--["), 4, "]-[");  // a UnicodeSet writes a difference with one '-'
    alpha.applyPattern(UnicodeString::fromUTF8(set), status);
    if (U_FAILURE(status)) throw Error(std::string("the Moses letter class does not compile: ") + u_errorName(status));
    comma.emplace_back(std::string("([^") + kNumber + "])[,]", "$1 , ");
    comma.emplace_back(std::string("[,]([^") + kNumber + "])", " , $1");
    comma.emplace_back(std::string("([") + kNumber + "])[,]$", "$1 , ");
    const std::string a = alpha_class(lang), n = kNumber;
    if (lang == "en") {
      apostrophe.emplace_back("([^" + a + "])[']([^" + a + "])", "$1 ' $2");
      apostrophe.emplace_back("([^" + a + n + "])[']([" + a + "])", "$1 ' $2");
      apostrophe.emplace_back("([" + a + "])[']([^" + a + "])", "$1 ' $2");
      apostrophe.emplace_back("([" + a + "])[']([" + a + "])", "$1 '$2");
      apostrophe.emplace_back("([" + n + "])[']([s])", "$1 '$2");
    } else if (lang == "fr" || lang == "it") {
      apostrophe.emplace_back("([^" + a + "])[']([^" + a + "])", "$1 ' $2");
      apostrophe.emplace_back("([^" + a + "])[']([" + a + "])", "$1 ' $2");
      apostrophe.emplace_back("([" + a + "])[']([^" + a + "])", "$1 ' $2");
      apostrophe.emplace_back("([" + a + "])[']([" + a + "])", "$1' $2");
    } else {
      apostrophe.emplace_back("\\'", " ' ");
    }
    for (auto [from, to] : {std::pair{"&", "&amp;"}, std::pair{"\\|", "&#124;"}, std::pair{"<", "&lt;"},
                            std::pair{">", "&gt;"}, std::pair{"\\'", "&apos;"}, std::pair{"\\\"", "&quot;"},
                            std::pair{"\\[", "&#91;"}, std::pair{"\\]", "&#93;"}}) {
      escape.emplace_back(from, to);
    }
  }
};

MosesTokenizer::MosesTokenizer(MosesOptions opt) : opt_(std::move(opt)) {
  std::vector<std::string> entries;
  if (!opt_.nonbreaking_prefixes.empty()) {
    for (const std::string& line :
         io::read_lines(opt_.nonbreaking_prefixes, "nonbreaking prefix file", kMaxNonbreakingPrefixBytes)) {
      const auto b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
      if (b == std::string::npos || line[b] == '#') continue;
      entries.push_back(line.substr(b, e - b + 1));
    }
  } else {
    entries = builtin_prefixes(opt_.lang);
  }
  for (const auto& e : entries) {
    prefixes_.insert(e);
    const auto mark = e.find(" #NUMERIC_ONLY#");
    if (mark != std::string::npos) numeric_only_.insert(e.substr(0, e.rfind(' ', mark)));
  }
  rules_ = std::make_unique<Rules>(opt_.lang, opt_.aggressive_dash_splits);
}

MosesTokenizer::~MosesTokenizer() = default;
MosesTokenizer::MosesTokenizer(MosesTokenizer&&) noexcept = default;

std::string MosesTokenizer::handle_nonbreaking_prefixes(const std::string& text) const {
  auto tokens = split_spaces(text);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    if (token.size() < 2 || token.back() != '.') continue;
    const std::string prefix = token.substr(0, token.size() - 1);
    bool any_alpha = false;
    const UnicodeString u = UnicodeString::fromUTF8(prefix);
    for (int32_t k = 0; k < u.length(); k = u.moveIndex32(k, 1)) any_alpha |= rules_->alpha.contains(u.char32At(k));
    const bool numeric_only = numeric_only_.count(prefix) > 0;
    const bool next_lower = i + 1 < tokens.size() && u_hasBinaryProperty(first_code_point(tokens[i + 1]), UCHAR_LOWERCASE);
    if ((prefix.find('.') != std::string::npos && any_alpha) || (prefixes_.count(prefix) && !numeric_only) || next_lower) {
      continue;
    }
    if (numeric_only && i + 1 < tokens.size() && !tokens[i + 1].empty() && tokens[i + 1][0] >= '0' && tokens[i + 1][0] <= '9') {
      continue;
    }
    tokens[i] = prefix + " .";
  }
  return join_words(tokens);
}

std::string MosesTokenizer::tokenize(const std::string& line) const {
  const Rules& r = *rules_;
  UnicodeString t = r.junk.apply(r.spaces.apply(UnicodeString::fromUTF8(line)));
  t = r.pad_not_alnum.apply(r.trim.apply(t));
  if (opt_.aggressive_dash_splits) t = r.dash.apply(t);
  t = protect_dot_runs(r.dot_runs, r.multidot.apply(t));
  for (const auto& s : r.comma) t = s.apply(t);
  for (const auto& s : r.apostrophe) t = s.apply(t);
  t = UnicodeString::fromUTF8(handle_nonbreaking_prefixes(utf8(t)));
  t = r.trailing_dot_apostrophe.apply(r.trim.apply(r.spaces.apply(t)));
  t = restore_dot_runs(r.dot_marks, t);
  if (opt_.escape) {
    for (const auto& s : r.escape) t = s.apply(t);
  }
  return utf8(t);
}

struct MosesDetokenizer::Rules {
  Substitution dash{" @-@ ", "-"};
  std::vector<Substitution> unescape;
  Rules() {
    for (auto [from, to] : {std::pair{"&bar;", "|"}, std::pair{"&#124;", "|"}, std::pair{"&lt;", "<"},
                            std::pair{"&gt;", ">"}, std::pair{"&bra;", "["}, std::pair{"&ket;", "]"},
                            std::pair{"&quot;", "\""}, std::pair{"&apos;", "'"}, std::pair{"&#91;", "["},
                            std::pair{"&#93;", "]"}, std::pair{"&amp;", "&"}}) {
      unescape.emplace_back(from, to);
    }
  }
};

MosesDetokenizer::MosesDetokenizer(std::string lang, bool unescape)
    : lang_(std::move(lang)), unescape_(unescape), rules_(std::make_unique<Rules>()) {}
MosesDetokenizer::~MosesDetokenizer() = default;
MosesDetokenizer::MosesDetokenizer(MosesDetokenizer&&) noexcept = default;

namespace {
// The code points sacremoses' detokenizer joins without spaces: Hangul Jamo, CJK radicals to Yi,
// Phags-pa, Hangul syllables, compatibility ideographs and forms, halfwidth forms from U+FF65 (not
// the fullwidth punctuation before it), Tangut, Kana supplements, Nushu and the supplementary
// ideographic plane.
bool is_cjk(UChar32 c) {
  static const UChar32 ranges[][2] = {{0x1100, 0x11FF},   {0x2E80, 0xA4CF},   {0xA840, 0xA87F},   {0xAC00, 0xD7AF},
                                      {0xF900, 0xFAFF},   {0xFE30, 0xFE4F},   {0xFF65, 0xFFDC},   {0x17000, 0x18AFF},
                                      {0x1B000, 0x1B12F}, {0x1B170, 0x1B2FF}, {0x20000, 0x2FFFF}};
  for (const auto& r : ranges) {
    if (c >= r[0] && c <= r[1]) return true;
  }
  return false;
}
UChar32 last_code_point(const std::string& s) {
  const UnicodeString u = UnicodeString::fromUTF8(s);
  return u.isEmpty() ? 0 : u.char32At(u.length() - 1);
}
// Every code point of `token` in `chars` (a UTF-8 list) or of general category Sc when `currency`.
bool all_of(const std::string& token, const std::string& chars, bool currency = false) {
  const UnicodeString u = UnicodeString::fromUTF8(token), set = UnicodeString::fromUTF8(chars);
  if (u.isEmpty()) return false;
  for (int32_t k = 0; k < u.length(); k = u.moveIndex32(k, 1)) {
    const UChar32 c = u.char32At(k);
    if (set.indexOf(c) < 0 && !(currency && u_charType(c) == U_CURRENCY_SYMBOL)) return false;
  }
  return true;
}
}  // namespace

std::string MosesDetokenizer::detokenize(const std::string& tokens_line) const {
  UnicodeString text = rules_->dash.apply(UnicodeString::fromUTF8(" " + tokens_line + " "));
  if (unescape_) {
    for (const auto& s : rules_->unescape) text = s.apply(text);
  }
  const auto tokens = split_spaces(utf8(text));
  std::map<std::string, int> quotes;
  std::string out, prepend = " ";
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    const UChar32 first = first_code_point(token);
    if (is_cjk(first) && lang_ != "ko") {
      out += (i > 0 && is_cjk(last_code_point(tokens[i - 1])) ? "" : prepend) + token;
      prepend = " ";
    } else if (all_of(token, "([{¿¡", true)) {  // currency and opening brackets: right shift
      out += prepend + token;
      prepend = "";
    } else if (all_of(token, ",.?!:;\\%}])")) {  // closing punctuation: left shift
      if (lang_ == "fr" && token.size() == 1 && std::string("?!:;\\%").find(token) != std::string::npos) out += " ";
      out += token;
      prepend = " ";
    } else if (lang_ == "en" && i > 0 && token.size() > 1 && token[0] == '\'' &&
               u_hasBinaryProperty(first_code_point(token.substr(1)), UCHAR_ALPHABETIC)) {
      out += token;  // English contractions attach to the word before
      prepend = " ";
    } else if ((lang_ == "fr" || lang_ == "it" || lang_ == "ga") && i + 1 < tokens.size() && token.size() > 1 &&
               token.back() == '\'' && u_hasBinaryProperty(last_code_point(token.substr(0, token.size() - 1)), UCHAR_ALPHABETIC) &&
               u_hasBinaryProperty(first_code_point(tokens[i + 1]), UCHAR_ALPHABETIC)) {
      out += prepend + token;  // French and Italian elisions attach to the word after
      prepend = "";
    } else if (all_of(token, "'\"„“`")) {
      std::string quote = all_of(token, "„“”") ? "\"" : token;
      int& count = quotes[quote];
      if (count % 2 == 0) {
        if (lang_ == "en" && token == "'" && i > 0 && !tokens[i - 1].empty() && tokens[i - 1].back() == 's') {
          out += token;  // a possessive after a plural: "the Jones' house"
          prepend = " ";
        } else {
          out += prepend + token;
          prepend = "";
          ++count;
        }
      } else {
        out += token;
        prepend = " ";
        ++count;
      }
    } else {
      out += prepend + token;
      prepend = " ";
    }
  }
  // One space between words, none at the ends.
  std::string clean;
  for (char c : out) {
    if (c == ' ' && (clean.empty() || clean.back() == ' ')) continue;
    clean += c;
  }
  while (!clean.empty() && clean.back() == ' ') clean.pop_back();
  return clean;
}

}  // namespace leanseq::text

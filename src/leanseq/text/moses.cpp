#include "leanseq/text/moses.h"

#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <fstream>
#include <map>
#include <sstream>

#include "leanseq/core/error.h"

namespace leanseq::text {

namespace {

using icu::UnicodeString;

// Perl's Unicode classes as ICU writes them, for use inside [...].
const char* const kAlnum = "\\p{Alphabetic}\\p{Nd}";
const char* const kAlpha = "\\p{Alphabetic}";
const char* const kNumber = "\\p{N}";

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
  bool found_in(const UnicodeString& text) const {
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> m(pattern_->matcher(text, status));
    return m->find();
  }

 private:
  std::unique_ptr<icu::RegexPattern> pattern_;
  UnicodeString replacement_;
};

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

// Written for leanseq: abbreviations after which a period does not end a sentence. Entries
// followed by #NUMERIC_ONLY# count only before a number.
const char* const kPrefixesEn =
    "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z "
    "Adj Adm Adv Asst Bart Bldg Brig Bros Capt Cmdr Col Comdr Con Corp Cpl DR Dr Drs Ens Gen Gov Hon Hr Hosp "
    "Insp Lt MM MR MRS MS Maj Messrs Mlle Mme Mr Mrs Ms Msgr Op Ord Pfc Ph Prof Pvt Rep Reps Res Rev Rt Sen Sens "
    "Sfc Sgt Sr St Supt Surg Jr v vs i.e rev e.g etc Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec "
    "No#NUMERIC_ONLY Nos Art#NUMERIC_ONLY Nr pp#NUMERIC_ONLY";
const char* const kPrefixesDe =
    "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z Ä Ö Ü "
    "a b c d e f g h i j k l m n o p q r s t u v w x y z ä ö ü "
    "Abs Abt Adr Anm Aufl Bd Bde Bsp Bzw bzw ca Chr d.h Dipl Dr Fa Fam Frl Gebr ggf Hr Hrn Ing inkl Jh Jhd jr "
    "Kap Kfm Kl Mio Mrd Nr#NUMERIC_ONLY Prof Red Reg rd sog St Std Str Tel usw u.a u.ä vgl vs z.B z.T zB zz evtl "
    "Jan Feb Mär Apr Jun Jul Aug Sep Sept Okt Nov Dez Mo Di Mi Do Fr Sa So Art#NUMERIC_ONLY Nrn";

}  // namespace

struct MosesTokenizer::Rules {
  std::vector<Substitution> start, comma, apostrophe, escape;
  Substitution pad_not_alnum, dash, multidot_1, multidot_2, multidot_3, spaces, junk, trim, trailing_dot_apostrophe,
      restore_2, restore_1;
  Rules(const std::string& lang, bool aggressive)
      : pad_not_alnum(std::string("([^") + kAlnum + "\\s\\.'`,\\-])", " $1 "),
        dash(std::string("([") + kAlnum + "])\\-(?=[" + kAlnum + "])", "$1 @-@ "),
        multidot_1("\\.([\\.]+)", " DOTMULTI$1"),
        multidot_2("DOTMULTI\\.([^\\.])", "DOTDOTMULTI $1"),
        multidot_3("DOTMULTI\\.", "DOTDOTMULTI"),
        spaces("\\s+", " "),
        junk("[\\x00-\\x1f]", ""),
        trim("^\\s+|\\s+$", ""),
        trailing_dot_apostrophe("\\.' ?$", " . ' "),
        restore_2("DOTDOTMULTI", "DOTMULTI."),
        restore_1("DOTMULTI", ".") {
    (void)aggressive;
    comma.emplace_back(std::string("([^") + kNumber + "])[,]", "$1 , ");
    comma.emplace_back(std::string("[,]([^") + kNumber + "])", " , $1");
    comma.emplace_back(std::string("([") + kNumber + "])[,]$", "$1 , ");
    const std::string a = kAlpha, n = kNumber;
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
    std::ifstream f(opt_.nonbreaking_prefixes);
    if (!f) throw DataError(opt_.nonbreaking_prefixes + ": nonbreaking prefix file not found");
    for (std::string line; std::getline(f, line);) {
      const auto b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
      if (b == std::string::npos || line[b] == '#') continue;
      entries.push_back(line.substr(b, e - b + 1));
    }
  } else {
    const char* builtin = opt_.lang == "de" ? kPrefixesDe : opt_.lang == "en" ? kPrefixesEn : "";
    for (auto w : split_spaces(builtin)) {
      const auto mark = w.find("#NUMERIC_ONLY");
      entries.push_back(mark == std::string::npos ? w : w.substr(0, mark) + " #NUMERIC_ONLY#");
    }
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
    for (int32_t k = 0; k < u.length(); k = u.moveIndex32(k, 1)) any_alpha |= u_hasBinaryProperty(u.char32At(k), UCHAR_ALPHABETIC);
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
  std::string out;
  for (const auto& t : tokens) out += (out.empty() ? "" : " ") + t;
  return out;
}

std::string MosesTokenizer::tokenize(const std::string& line) const {
  const Rules& r = *rules_;
  UnicodeString t = r.junk.apply(r.spaces.apply(UnicodeString::fromUTF8(line)));
  t = r.pad_not_alnum.apply(r.trim.apply(t));
  if (opt_.aggressive_dash_splits) t = r.dash.apply(t);
  t = r.multidot_1.apply(t);
  while (r.multidot_3.found_in(t)) t = r.multidot_3.apply(r.multidot_2.apply(t));
  for (const auto& s : r.comma) t = s.apply(t);
  for (const auto& s : r.apostrophe) t = s.apply(t);
  t = UnicodeString::fromUTF8(handle_nonbreaking_prefixes(utf8(t)));
  t = r.trailing_dot_apostrophe.apply(r.trim.apply(r.spaces.apply(t)));
  while (r.restore_2.found_in(t)) t = r.restore_2.apply(t);
  t = r.restore_1.apply(t);
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
bool is_cjk(UChar32 c) {
  return (c >= 0x1100 && c <= 0x11FF) || (c >= 0x2E80 && c <= 0x2FDF) || (c >= 0x2FF0 && c <= 0x9FFF) ||
         (c >= 0xA960 && c <= 0xA97F) || (c >= 0xAC00 && c <= 0xD7FF) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFFEF) || (c >= 0x20000 && c <= 0x2FA1F);
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

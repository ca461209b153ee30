// The Moses tokenizer and detokenizer as sacremoses (0.0.45) runs them, for the models fairseq
// users trained on Moses-tokenized text: the same rules in the same order, over Unicode character
// classes (ICU's Alphabetic, Nd, N, Sc, So and Lowercase for Perl's IsAlpha, IsAlnum, IsN, IsSc,
// IsSo and IsLower), XML escaping on or off, aggressive dash splitting off unless asked for, and
// the nonbreaking prefixes of a language (built-in lists for every language sacremoses ships one
// for: cs, de, en, es, fr, it, pt, ro, ru; or a Moses nonbreaking_prefix file). Apostrophes follow
// en's and fr/it's rules; other languages take the rules for all languages.
#pragma once
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace leanseq::text {

struct MosesOptions {
  std::string lang = "en";
  bool escape = true;                  // tokenizer: & | < > ' " [ ] as XML entities
  bool aggressive_dash_splits = false;  // "foo-bar" -> "foo @-@ bar"
  std::string nonbreaking_prefixes;    // a Moses nonbreaking_prefix file instead of the built-in list
};

class MosesTokenizer {
 public:
  explicit MosesTokenizer(MosesOptions opt);
  ~MosesTokenizer();
  MosesTokenizer(MosesTokenizer&&) noexcept;
  // One line of text as space-separated tokens.
  std::string tokenize(const std::string& line) const;

 private:
  struct Rules;
  MosesOptions opt_;
  std::unordered_set<std::string> prefixes_, numeric_only_;
  std::unique_ptr<Rules> rules_;
  std::string handle_nonbreaking_prefixes(const std::string& text) const;
};

class MosesDetokenizer {
 public:
  explicit MosesDetokenizer(std::string lang, bool unescape = true);
  ~MosesDetokenizer();
  MosesDetokenizer(MosesDetokenizer&&) noexcept;
  // Space-separated tokens as text.
  std::string detokenize(const std::string& tokens) const;

 private:
  struct Rules;
  std::string lang_;
  bool unescape_;
  std::unique_ptr<Rules> rules_;
};

}  // namespace leanseq::text

#include "leanseq/text/bpe.h"

#include <unicode/regex.h>

#include <queue>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"

namespace leanseq::text {

namespace {

const char* kStrip = "\r\n ";
constexpr uint64_t kMaxCodesBytes = uint64_t{1} << 30;

std::string strip(const std::string& s) {
  const auto b = s.find_first_not_of(kStrip);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(kStrip) - b + 1);
}

// The code points of a UTF-8 string, each as its bytes (invalid bytes one by one).
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

const std::string kEndOfWord = "</w>";

// "a b 123": two non-empty subwords and a decimal count, one space apart (fastBPE's codes).
bool is_fastbpe_line(const std::string& item) {
  const auto a = item.find(' ');
  if (a == 0 || a == std::string::npos) return false;
  const auto b = item.find(' ', a + 1);
  if (b == std::string::npos || b == a + 1 || b + 1 == item.size()) return false;
  for (size_t i = b + 1; i < item.size(); ++i) {
    if (item[i] < '0' || item[i] > '9') return false;
  }
  return true;
}

}  // namespace

class Bpe::Glossary {
 public:
  explicit Glossary(const std::string& pattern) : text_(pattern) {
    UErrorCode status = U_ZERO_ERROR;
    UParseError where;
    pattern_.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), where, status));
    if (U_FAILURE(status)) {
      throw ConfigError("glossary '" + pattern.substr(0, 200) + "': not a regular expression (" + u_errorName(status) +
                        " at offset " + std::to_string(where.offset) + ")");
    }
  }
  // Whether the whole of `word` matches (subword-nmt's re.match('^' + glossary + '$')).
  bool matches(const std::string& word) const {
    const auto u = icu::UnicodeString::fromUTF8(word);
    auto m = matcher(u, word);
    UErrorCode status = U_ZERO_ERROR;
    const bool whole = m->matches(status);
    check(status, word);
    return whole;
  }
  // `word` cut around the glossary's matches, kept (subword-nmt's isolate_glossary).
  void isolate(const std::string& word, std::vector<std::string>& out) const {
    const auto u = icu::UnicodeString::fromUTF8(word);
    auto m = matcher(u, word);
    UErrorCode status = U_ZERO_ERROR;
    std::vector<std::string> parts;
    int32_t last = 0;
    bool found = false;
    while (m->find(status) && U_SUCCESS(status)) {
      found = true;
      const int32_t start = m->start(status), end = m->end(status);
      if (start > last) parts.push_back(utf8(u.tempSubStringBetween(last, start)));
      if (end > start) parts.push_back(utf8(u.tempSubStringBetween(start, end)));
      last = end;
    }
    check(status, word);
    if (!found || matches(word)) {
      out.push_back(word);
      return;
    }
    const std::string ending = strip(utf8(u.tempSubStringBetween(last)));
    if (!ending.empty()) parts.push_back(ending);
    for (auto& p : parts) out.push_back(std::move(p));
  }

 private:
  // A matcher bounded in backtracking memory (ICU's heap stack) and in time (about a second).
  std::unique_ptr<icu::RegexMatcher> matcher(const icu::UnicodeString& u, const std::string& word) const {
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> m(pattern_->matcher(u, status));
    check(status, word);
    m->setStackLimit(kStackBytes, status);
    m->setTimeLimit(kTimeSteps, status);
    check(status, word);
    return m;
  }
  void check(UErrorCode status, const std::string& word) const {
    if (U_FAILURE(status)) {
      throw DataError("glossary '" + text_.substr(0, 200) + "' cannot be matched against a word of " +
                      std::to_string(word.size()) + " bytes within its bounds (" + u_errorName(status) + ")");
    }
  }
  static std::string utf8(const icu::UnicodeString& u) {
    std::string s;
    u.toUTF8String(s);
    return s;
  }
  static constexpr int32_t kStackBytes = 8 << 20;
  static constexpr int32_t kTimeSteps = 1000;
  std::string text_;
  std::unique_ptr<icu::RegexPattern> pattern_;
};

Bpe Bpe::from_text(const std::string& codes, const std::string& origin, const std::vector<std::string>& glossaries,
                   std::string separator) {
  Bpe bpe;
  bpe.separator_ = std::move(separator);
  std::istringstream in(codes);
  std::string line;
  int64_t number = 0, rank = 0;
  bool first = true;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = origin + ":" + std::to_string(number) + ": ";
    io::check_utf8_line(origin, number, line);
    if (line.find('\0') != std::string::npos) throw DataError(where + "a NUL byte in BPE codes");
    const std::string item = strip(line);
    if (first) {
      first = false;
      if (line.rfind("#version:", 0) == 0) {
        // subword-nmt writes 0.1 (no header, "</w>" a symbol of its own) or 0.2 (the header).
        const std::string v = strip(line.substr(9));
        if (v != "0.1" && v != "0.2") {
          throw DataError(where + "BPE codes of version '" + v.substr(0, 40) + "' (subword-nmt writes 0.1 or 0.2)");
        }
        bpe.word_final_suffix_ = v != "0.1";
        continue;
      }
      // fastBPE's learnbpe writes "a b count" and no header; its merges are those of version 0.2.
      bpe.fastbpe_ = is_fastbpe_line(item);
      bpe.word_final_suffix_ = bpe.fastbpe_;  // else no header: version 0.1
    }
    if (item.empty() && in.peek() == std::char_traits<char>::eof()) break;  // the final newline
    if (bpe.fastbpe_) {
      if (!is_fastbpe_line(item)) {
        throw DataError(where + "a fastBPE merge must be two subwords and a count, got '" + item.substr(0, 200) + "'");
      }
      const auto space = item.find(' ');
      bpe.ranks_.emplace(std::make_pair(item.substr(0, space), item.substr(space + 1, item.rfind(' ') - space - 1)),
                         static_cast<int>(rank++));
      continue;
    }
    const auto space = item.find(' ');
    if (space == std::string::npos || item.find(' ', space + 1) != std::string::npos) {
      throw DataError(where + "a BPE merge must be two subwords separated by a space, got '" + item.substr(0, 200) + "'");
    }
    bpe.ranks_.emplace(std::make_pair(item.substr(0, space), item.substr(space + 1)), static_cast<int>(rank++));
  }
  for (const auto& g : glossaries) bpe.glossaries_.push_back(std::make_shared<const Glossary>(g));
  return bpe;
}

namespace {

// The symbols of a word merged as subword-nmt merges them: the pair of the earliest merge
// operation everywhere it occurs (left to right, an occurrence that overlaps the one before it
// skipped), again until no pair has one. One pass over the word per merge operation made a long
// word cost its length times the operations it takes; here the pairs wait in a heap by (rank,
// position), the symbols form a linked list, and the pairs one merge makes wait until every
// occurrence of that merge is done, as subword-nmt's next pass would find them.
std::vector<std::string> merge_symbols(std::vector<std::string> word,
                                       const std::map<std::pair<std::string, std::string>, int>& ranks) {
  const int n = static_cast<int>(word.size());
  std::vector<int> next(n), prev(n), version(n, 0);
  for (int i = 0; i < n; ++i) next[i] = i + 1 < n ? i + 1 : -1, prev[i] = i - 1;
  struct Pair {
    int rank, left, right, left_version, right_version;
    bool operator>(const Pair& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Pair, std::vector<Pair>, std::greater<Pair>> heap;
  auto offer = [&](int left) {
    const int right = left < 0 ? -1 : next[left];
    if (right < 0) return;
    const auto it = ranks.find({word[left], word[right]});
    if (it != ranks.end()) heap.push({it->second, left, right, version[left], version[right]});
  };
  for (int i = 0; i + 1 < n; ++i) offer(i);
  std::vector<int> merged;
  while (!heap.empty()) {
    const int rank = heap.top().rank;
    merged.clear();
    while (!heap.empty() && heap.top().rank == rank) {
      const Pair p = heap.top();
      heap.pop();
      // Stale: a symbol of it was merged since it was offered (every merge changes the versions of
      // both its symbols, the right one's for good).
      if (version[p.left] != p.left_version || version[p.right] != p.right_version) continue;
      word[p.left] += word[p.right];
      ++version[p.left], ++version[p.right];
      next[p.left] = next[p.right];
      if (next[p.left] >= 0) prev[next[p.left]] = p.left;
      merged.push_back(p.left);
    }
    for (const int at : merged) offer(prev[at]), offer(at);
  }
  std::vector<std::string> out;
  for (int i = 0; i >= 0 && i < n; i = next[i]) out.push_back(std::move(word[i]));
  return out;
}

}  // namespace

Bpe Bpe::from_file(const std::string& path, const std::vector<std::string>& glossaries) {
  return from_text(io::read_file(path, "BPE codes", kMaxCodesBytes), path, glossaries);
}

std::vector<std::string> Bpe::encode_word(const std::string& orig) const {
  {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (auto it = cache_->words.find(orig); it != cache_->words.end()) return it->second;
  }
  auto word = merge(orig);
  std::lock_guard<std::mutex> lock(cache_->mutex);
  if (cache_->words.size() >= kMaxCachedWords) cache_->words.clear();
  cache_->words.emplace(orig, word);
  return word;
}

std::vector<std::string> Bpe::merge(const std::string& orig) const {
  for (const auto& g : glossaries_) {
    if (g->matches(orig)) return {orig};
  }
  auto word = code_points(orig);
  if (word.size() <= 1) return word;
  if (word_final_suffix_) {
    word.back() += kEndOfWord;
  } else {
    word.push_back(kEndOfWord);
  }
  word = merge_symbols(std::move(word), ranks_);
  if (word.back() == kEndOfWord) {
    word.pop_back();
  } else if (word.back().size() >= kEndOfWord.size() &&
             word.back().compare(word.back().size() - kEndOfWord.size(), kEndOfWord.size(), kEndOfWord) == 0) {
    word.back().resize(word.back().size() - kEndOfWord.size());
  }
  return word;
}

std::vector<std::string> Bpe::segment_word(const std::string& word) const {
  // Glossary matches inside the word are cut out, one glossary after the other.
  std::vector<std::string> segments{word};
  for (const auto& g : glossaries_) {
    std::vector<std::string> next;
    for (const auto& s : segments) g->isolate(s, next);
    segments = std::move(next);
  }
  std::vector<std::string> out;
  for (const auto& s : segments) {
    for (auto& piece : encode_word(s)) out.push_back(std::move(piece));
  }
  return out;
}

std::string Bpe::apply_line(const std::string& line) const {
  const auto begin = line.find_first_not_of(kStrip);
  if (begin == std::string::npos) return line;
  const auto end = line.find_last_not_of(kStrip) + 1;
  std::string out = line.substr(0, begin);
  const std::string body = line.substr(begin, end - begin);
  bool first = true;
  for (size_t i = 0; i <= body.size();) {
    size_t j = body.find(' ', i);
    if (j == std::string::npos) j = body.size();
    const std::string word = body.substr(i, j - i);
    i = j + 1;
    if (word.empty()) continue;
    const auto pieces = segment_word(word);
    for (size_t k = 0; k < pieces.size(); ++k) {
      out += (first ? "" : " ") + pieces[k] + (k + 1 < pieces.size() ? separator_ : "");
      first = false;
    }
  }
  return out + line.substr(end);
}

std::string Bpe::remove(const std::string& segmented) const {
  std::string s = segmented + " ", out;
  const std::string joint = separator_ + " ";
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, joint.size(), joint) == 0) {
      i += joint.size();
    } else {
      out += s[i++];
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace leanseq::text

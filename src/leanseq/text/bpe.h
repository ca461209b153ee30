// subword-nmt's BPE segmentation (apply_bpe), for the models that fairseq users trained on Moses +
// BPE data: merge operations from a codes file (subword-nmt's versions 0.1 and 0.2, or fastBPE's
// "a b count" lines, which segment as version 0.2 does), applied in their order to
// each whitespace-separated word; every subword but a word's last gets the separator ("@@"), so
// that "@@ " joins them back. Glossaries (regular expressions) are never split: a word that matches
// one whole is kept, and matches inside a word are cut out and kept.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace leanseq::text {

class Bpe {
 public:
  // Throws DataError naming `origin` and the line for a malformed codes file.
  static Bpe from_text(const std::string& codes, const std::string& origin, const std::vector<std::string>& glossaries = {},
                       std::string separator = "@@");
  static Bpe from_file(const std::string& path, const std::vector<std::string>& glossaries = {});

  // A whitespace-tokenized line segmented; leading and trailing whitespace kept as it was.
  std::string apply_line(const std::string& line) const;
  // The subwords of one word (without separators).
  std::vector<std::string> encode_word(const std::string& word) const;
  // Whether the codes were fastBPE's (else subword-nmt's).
  bool fastbpe() const { return fastbpe_; }
  // "@@ " joins removed: the words back ("Män@@ ner" -> "Männer").
  std::string remove(const std::string& segmented) const;

 private:
  std::vector<std::string> segment_word(const std::string& word) const;
  std::map<std::pair<std::string, std::string>, int> ranks_;
  bool word_final_suffix_ = true;  // codes version 0.2 (else 0.1: "</w>" as a separate symbol)
  bool fastbpe_ = false;
  std::string separator_ = "@@";
  // Glossaries as ICU regular expressions (Python's syntax, as subword-nmt's): ICU's matcher keeps
  // its backtracking on a bounded heap stack under a time limit, where std::regex recursed once
  // per character of a word and overflowed the thread's stack on long ones.
  class Glossary;
  std::vector<std::shared_ptr<const Glossary>> glossaries_;
  std::vector<std::string> merge(const std::string& word) const;
  // Words already segmented, shared by copies and by threads (a server's workers): at most
  // kMaxCachedWords, then it starts again, so that a stream of new words cannot grow it.
  struct WordCache {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<std::string>> words;
  };
  static constexpr size_t kMaxCachedWords = 1 << 16;
  std::shared_ptr<WordCache> cache_ = std::make_shared<WordCache>();
};

}  // namespace leanseq::text

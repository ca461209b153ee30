// fairseq-format dictionary: <s>=0 <pad>=1 </s>=2 <unk>=3, then symbols by frequency;
// dict.txt holds "symbol count" per line (specials are implicit).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace leanseq::data {

class Dictionary {
 public:
  static constexpr int64_t kBos = 0, kPad = 1, kEos = 2, kUnk = 3, kNumSpecial = 4;

  Dictionary();
  int64_t add(const std::string& symbol, int64_t count = 1);
  int64_t index(const std::string& symbol) const;  // kUnk when absent
  const std::string& symbol(int64_t id) const;
  int64_t size() const { return static_cast<int64_t>(symbols_.size()); }
  int64_t count(int64_t id) const { return counts_[id]; }

  // Sorts the non-special symbols by descending count (ties by symbol), drops those below
  // `threshold`, keeps at most `max_symbols` of them (< 0: all), and pads the size to a multiple
  // of `pad_to` with madeupwordNNNN symbols as fairseq does (pad_to <= 1: none).
  void finalize(int64_t threshold = 1, int64_t max_symbols = -1, int64_t pad_to = 8);

  void save(const std::string& path) const;  // atomic
  std::string to_text() const;                // what save writes
  static Dictionary load(const std::string& path);
  // Parses dict.txt contents held in memory; `origin` names them in errors.
  static Dictionary parse(const std::string& text, const std::string& origin);

  // Encodes whitespace-separated pieces, appending </s>.
  std::vector<int64_t> encode(const std::vector<std::string>& pieces, bool append_eos = true) const;
  // Pieces of `ids` up to (excluding) the first </s>; pads and <s> are skipped.
  std::vector<std::string> decode(const std::vector<int64_t>& ids) const;

 private:
  static Dictionary from_lines(const std::vector<std::string>& lines, const std::string& path);
  std::vector<std::string> symbols_;
  std::vector<int64_t> counts_;
  std::unordered_map<std::string, int64_t> index_;
};

}  // namespace leanseq::data

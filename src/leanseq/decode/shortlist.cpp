#include "leanseq/decode/shortlist.h"

#include <algorithm>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/strings.h"

namespace leanseq::decode {

namespace {
// The longest source n-gram a rule may have (CTranslate2's maps use unigrams to trigrams).
constexpr size_t kMaxNgram = 8;
constexpr uint64_t kMaxShortlistBytes = uint64_t{1} << 30;
}  // namespace

Shortlist Shortlist::read(const std::string& path, const data::Dictionary& tgt) {
  Shortlist s;
  s.vocab_ = tgt.size();
  int64_t number = 0;
  for (const auto& line : io::read_lines(path, "shortlist", kMaxShortlistBytes)) {
    ++number;
    if (line.empty()) continue;
    const auto tab = line.find('\t');
    if (tab == std::string::npos) {
      throw DataError(path + ":" + std::to_string(number) +
                      ": a shortlist line is source subwords, a tab and target subwords, got no tab");
    }
    std::istringstream source_words(line.substr(0, tab)), target_words(line.substr(tab + 1));
    std::vector<std::string> source;
    for (std::string w; source_words >> w;) source.push_back(w);
    if (source.size() > kMaxNgram) {
      throw DataError(path + ":" + std::to_string(number) + ": a source n-gram of " + std::to_string(source.size()) +
                      " subwords, more than " + std::to_string(kMaxNgram));
    }
    std::vector<int64_t> ids;
    for (std::string w; target_words >> w;) {
      const int64_t id = tgt.index(w);
      if (id == data::Dictionary::kUnk && w != tgt.symbol(data::Dictionary::kUnk)) {
        ++s.skipped_;
        continue;
      }
      ids.push_back(id);
    }
    if (source.empty()) {
      s.fixed_.insert(s.fixed_.end(), ids.begin(), ids.end());
      continue;
    }
    if (s.rules_.size() < source.size()) s.rules_.resize(source.size());
    auto& rule = s.rules_[source.size() - 1][join_words(source)];
    rule.insert(rule.end(), ids.begin(), ids.end());
  }
  return s;
}

int64_t Shortlist::entries() const {
  int64_t n = 0;
  for (const auto& r : rules_) n += static_cast<int64_t>(r.size());
  return n;
}

torch::Tensor Shortlist::ids_for(const std::vector<std::vector<std::string>>& sources,
                                 const std::vector<int64_t>& extra) const {
  std::vector<bool> in(static_cast<size_t>(vocab_), false);
  auto add = [&](int64_t id) {
    if (id >= 0 && id < vocab_) in[static_cast<size_t>(id)] = true;
  };
  for (int64_t id = 0; id < data::Dictionary::kNumSpecial; ++id) add(id);
  for (int64_t id : fixed_) add(id);
  for (int64_t id : extra) add(id);
  for (const auto& words : sources) {
    for (size_t n = 1; n <= rules_.size(); ++n) {
      for (size_t i = 0; i + n <= words.size(); ++i) {
        const auto found = rules_[n - 1].find(join_words({words.begin() + static_cast<std::ptrdiff_t>(i),
                                                    words.begin() + static_cast<std::ptrdiff_t>(i + n)}));
        if (found == rules_[n - 1].end()) continue;
        for (int64_t id : found->second) add(id);
      }
    }
  }
  std::vector<int64_t> ids;
  for (int64_t id = 0; id < vocab_; ++id) {
    if (in[static_cast<size_t>(id)]) ids.push_back(id);
  }
  return torch::tensor(ids, torch::kLong);
}

}  // namespace leanseq::decode

#include "leanseq/data/dictionary.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <sstream>

#include <c10/util/Exception.h>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"

namespace leanseq::data {

Dictionary::Dictionary() {
  for (const char* s : {"<s>", "<pad>", "</s>", "<unk>"}) add(s, 0);
}

int64_t Dictionary::add(const std::string& symbol, int64_t count) {
  auto it = index_.find(symbol);
  if (it != index_.end()) {
    // Saturating: counts read from a file may be as large (or, negative, as small) as int64
    // allows, and a symbol listed twice adds them up.
    auto& c = counts_[it->second];
    if (__builtin_add_overflow(c, count, &c)) {
      c = count > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
    }
    return it->second;
  }
  int64_t id = size();
  symbols_.push_back(symbol);
  counts_.push_back(count);
  index_.emplace(symbol, id);
  return id;
}

int64_t Dictionary::index(const std::string& symbol) const {
  auto it = index_.find(symbol);
  return it == index_.end() ? kUnk : it->second;
}

const std::string& Dictionary::symbol(int64_t id) const {
  TORCH_CHECK(id >= 0 && id < size(), "token id ", id, " outside the dictionary of ", size());
  return symbols_[id];
}

void Dictionary::finalize(int64_t threshold, int64_t max_symbols, int64_t pad_to) {
  std::vector<int64_t> order(symbols_.size() - kNumSpecial);
  std::iota(order.begin(), order.end(), kNumSpecial);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (counts_[a] != counts_[b]) return counts_[a] > counts_[b];
    return symbols_[a] < symbols_[b];
  });
  Dictionary out;
  for (int64_t id : order) {
    if (counts_[id] < threshold) break;
    if (max_symbols >= 0 && out.size() - kNumSpecial >= max_symbols) break;
    out.add(symbols_[id], counts_[id]);
  }
  for (int64_t i = 0; pad_to > 1 && out.size() % pad_to != 0; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "madeupword%04ld", static_cast<long>(i));
    out.add(buf, 0);
  }
  *this = std::move(out);
}

std::string Dictionary::to_text() const {
  std::ostringstream os;
  for (int64_t i = kNumSpecial; i < size(); ++i) os << symbols_[i] << ' ' << counts_[i] << '\n';
  return os.str();
}

void Dictionary::save(const std::string& path) const { io::atomic_write_text(path, to_text()); }

Dictionary Dictionary::load(const std::string& path) { return from_lines(io::read_lines(path), path); }

Dictionary Dictionary::parse(const std::string& text, const std::string& origin) {
  return from_lines(io::split_lines(text, origin), origin);
}

Dictionary Dictionary::from_lines(const std::vector<std::string>& lines, const std::string& path) {
  Dictionary d;
  for (size_t i = 0; i < lines.size(); ++i) {
    // fairseq's rule: "<symbol> <count>", optionally followed by the flag "#fairseq:overwrite",
    // without which a symbol listed twice (the specials included) is an error. With it, the
    // symbol gets a new id, the one its later uses map to.
    std::string line = lines[i];
    line.erase(line.find_last_not_of(" \t\r\f\v") + 1);
    const std::string flag = " #fairseq:overwrite";
    const bool overwrite = line.size() > flag.size() && line.compare(line.size() - flag.size(), flag.size(), flag) == 0;
    if (overwrite) line.resize(line.size() - flag.size());
    auto sp = line.rfind(' ');
    int64_t count = 0;
    bool ok = sp != std::string::npos && sp > 0;
    if (ok) {
      try {
        size_t pos;
        count = std::stoll(line.substr(sp + 1), &pos);
        ok = pos == line.size() - sp - 1;
      } catch (...) {
        ok = false;
      }
    }
    if (!ok) {
      throw DataError(path + ":" + std::to_string(i + 1) +
                      ": expected '<symbol> <count> [#fairseq:overwrite]' (fairseq dict.txt format), got '" +
                      line.substr(0, 200) + "'");
    }
    std::string symbol = line.substr(0, sp);
    if (d.index_.count(symbol)) {
      if (!overwrite) {
        throw DataError(path + ":" + std::to_string(i + 1) + ": '" + symbol.substr(0, 200) +
                        "' is listed twice (as fairseq, a repeated symbol needs the flag #fairseq:overwrite)");
      }
      d.index_.erase(symbol);
    }
    d.add(symbol, count);
  }
  return d;
}

std::vector<int64_t> Dictionary::encode(const std::vector<std::string>& pieces, bool append_eos) const {
  std::vector<int64_t> ids;
  ids.reserve(pieces.size() + 1);
  for (const auto& p : pieces) ids.push_back(index(p));
  if (append_eos) ids.push_back(kEos);
  return ids;
}

std::vector<std::string> Dictionary::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> out;
  for (int64_t id : ids) {
    if (id == kEos) break;
    if (id == kPad || id == kBos) continue;
    out.push_back(symbol(id));
  }
  return out;
}

}  // namespace leanseq::data

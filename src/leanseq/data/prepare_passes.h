// The passes of `prepare` (data/prepare.h) over a corpus and its temporary files: a split's two
// files read in step, fingerprints of the pairs seen (duplicate removal), and subword pieces
// written to and read from a length-prefixed file. Internal to prepare.
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "leanseq/core/io.h"
#include "leanseq/data/prepare.h"

namespace leanseq::data {
// Which lines of a split are kept (exact duplicates of an earlier pair left out); empty: every line.
using KeptLines = std::vector<bool>;

// A split's two files read in step, one pair at a time: fn(source line, target line), the source
// empty for a language model, for the lines `keep` keeps. DataError naming the file and line for
// text that is not UTF-8, an empty file, or sides of different lengths. Nothing is kept: memory
// does not grow with the corpus. `what` names the pass on the progress line (empty: none).
int64_t for_each_pair(const std::string& name, const std::string& prefix, const PrepareOptions& opt,
                      const std::function<void(const std::string&, const std::string&)>& fn,
                      const std::string& what = "", const KeptLines& keep = {});

// Fingerprints (64-bit hashes) of the distinct pairs seen, in an open-addressing table of at most
// four slots of 8 bytes per fingerprint: duplicate removal in 16 to 32 bytes per distinct pair.
// Two different pairs share a fingerprint with a probability of about n^2 / 2^65 (2.4e-7 for 3M
// pairs), which would drop the second.
class FingerprintSet {
 public:
  // Whether h was new (and is now in the set).
  bool insert(uint64_t h) {
    if (h == 0) h = 1;  // 0 marks an empty slot
    if (2 * (count_ + 1) > slots_.size()) grow();
    if (!place(slots_, h)) return false;
    ++count_;
    return true;
  }
  size_t bytes() const { return slots_.size() * sizeof(uint64_t); }

 private:
  static bool place(std::vector<uint64_t>& slots, uint64_t h) {
    const size_t mask = slots.size() - 1;
    for (size_t i = static_cast<size_t>(h) & mask;; i = (i + 1) & mask) {
      if (slots[i] == h) return false;
      if (slots[i] == 0) {
        slots[i] = h;
        return true;
      }
    }
  }
  void grow() {
    std::vector<uint64_t> bigger(slots_.empty() ? 1024 : 2 * slots_.size(), 0);
    for (uint64_t h : slots_) {
      if (h) place(bigger, h);
    }
    slots_.swap(bigger);
  }
  std::vector<uint64_t> slots_;
  size_t count_ = 0;
};

// A fingerprint of a pair (of a line, with an empty source).
uint64_t pair_fingerprint(const std::string& s, const std::string& t);

// Subword pieces of one line after another, length-prefixed (a piece may hold any byte), so that
// the dictionary can be counted before the ids are written without keeping the pieces in memory.
class PiecesFile {
 public:
  explicit PiecesFile(const std::string& path) : out_(path) {}
  void add(const std::vector<std::string>& pieces) {
    put(static_cast<uint32_t>(pieces.size()));
    for (const auto& p : pieces) {
      put(static_cast<uint32_t>(p.size()));
      out_.write(p.data(), p.size());
    }
  }
  void close() { out_.close(); }

 private:
  void put(uint32_t n) { out_.write(&n, sizeof n); }
  io::FileWriter out_;
};

class PiecesReader {
 public:
  explicit PiecesReader(const std::string& path);
  bool next(std::vector<std::string>& pieces);  // false at the end; DataError when truncated

 private:
  std::ifstream in_;
};

}  // namespace leanseq::data

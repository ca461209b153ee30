// Binarized, memory-mapped token datasets: <prefix>.bin holds int32 token ids of all sentences
// back to back (each ending with </s>), <prefix>.idx a small header and N+1 int64 offsets.
#pragma once
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "leanseq/core/io.h"

namespace leanseq::data {

class IndexedWriter {
 public:
  // In memory until save().
  IndexedWriter() = default;
  // Streaming: the ids and offsets go to <spill>.bin and <spill>.offsets as they come (a buffer of
  // kBufferEntries each), so that memory does not grow with the corpus; save() then moves the
  // ids file into place (the same file system) and writes the index from the offsets file.
  explicit IndexedWriter(std::string spill);
  ~IndexedWriter();
  IndexedWriter(const IndexedWriter&) = delete;
  IndexedWriter& operator=(const IndexedWriter&) = delete;
  void add(const std::vector<int64_t>& ids);
  // Writes both files atomically (once).
  void save(const std::string& prefix);
  size_t size() const { return static_cast<size_t>(count_); }
  static constexpr size_t kBufferEntries = size_t{1} << 20;

 private:
  void flush();
  std::string spill_;
  std::unique_ptr<io::FileWriter> bin_, offsets_file_;
  std::vector<int32_t> tokens_;
  std::vector<int64_t> offsets_{0};
  int64_t count_ = 0, total_tokens_ = 0;
};

// Writes fairseq-preprocess's format (fairseq 0.12's MMapIndexedDataset), which fairseq-train
// reads: <prefix>.bin holds the ids as uint16 when the vocabulary has fewer than 65 500 symbols
// (fairseq's best_fitting_int_dtype), else int32, streamed as they come; <prefix>.idx, written by
// finish(), a 26-byte header, the int32 sizes (kept in memory: 4 bytes per sentence) and the int64
// byte pointers. Both files appear only when finish() succeeds.
class FairseqIndexedWriter {
 public:
  FairseqIndexedWriter(std::string prefix, int64_t vocab_size);
  ~FairseqIndexedWriter();
  FairseqIndexedWriter(const FairseqIndexedWriter&) = delete;
  FairseqIndexedWriter& operator=(const FairseqIndexedWriter&) = delete;
  void add(const std::vector<int64_t>& ids);
  void finish();

 private:
  std::string prefix_;
  int elem_bytes_;
  std::unique_ptr<io::FileWriter> bin_;
  std::vector<int32_t> sizes_;
  bool finished_ = false;
};

// Reads leanseq's format and fairseq-preprocess's (MMapIndexedDataset: ids as uint16, int32, ...,
// as its index says; and the IndexedDataset of --dataset-impl lazy and cached); DataError naming
// the file for anything else, or a damaged or truncated one.
class IndexedDataset {
 public:
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;
  IndexedDataset(IndexedDataset&& o) noexcept;

  size_t size() const { return offsets_.size() - 1; }
  int64_t length(size_t i) const { return offsets_[i + 1] - offsets_[i]; }
  // The ids of sentence i (length(i) of them, </s> last).
  std::vector<int64_t> get(size_t i) const;

 private:
  void read_leanseq_index(std::ifstream& in, const std::string& idx, uint64_t file_size);
  void read_fairseq_index(std::ifstream& in, const std::string& idx, uint64_t file_size);
  void read_legacy_index(std::ifstream& in, const std::string& idx, uint64_t file_size);
  std::vector<int64_t> offsets_;  // in ids, N + 1
  void* map_ = nullptr;
  size_t map_size_ = 0;
  int elem_bytes_ = 4;  // how an id is stored: leanseq int32; fairseq as its dtype says
  bool elem_signed_ = true;
  int64_t id_shift_ = 0;  // subtracted from every stored id (fairseq's lazy/cached data: 1)
};

// Sentence `i` of `set` (read from `path`.bin), checked by its declared length before it is read
// (a data-bin may declare billions of tokens; `limit` 0: none; `limit_name` says what sets it),
// then by its ids (each below `dict_size`); DataError naming the file and the sentence.
std::vector<int64_t> checked_sentence(const IndexedDataset& set, size_t i, int64_t dict_size, const std::string& path,
                                      int64_t limit = 0, const std::string& limit_name = "");
// Every sentence of `set`, each checked by checked_sentence (no length limit).
std::vector<std::vector<int64_t>> checked_sentences(const IndexedDataset& set, int64_t dict_size, const std::string& path);

}  // namespace leanseq::data

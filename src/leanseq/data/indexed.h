// Binarized, memory-mapped token datasets: <prefix>.bin holds int32 token ids of all sentences
// back to back (each ending with </s>), <prefix>.idx a small header and N+1 int64 offsets.
#pragma once
#include <cstdint>
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

class IndexedDataset {
 public:
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;
  IndexedDataset(IndexedDataset&& o) noexcept;

  size_t size() const { return offsets_.size() - 1; }
  int64_t length(size_t i) const { return offsets_[i + 1] - offsets_[i]; }
  // Pointer to the int32 ids of sentence i (length(i) of them).
  const int32_t* tokens(size_t i) const { return data_ + offsets_[i]; }
  std::vector<int64_t> get(size_t i) const;

 private:
  std::vector<int64_t> offsets_;
  const int32_t* data_ = nullptr;
  void* map_ = nullptr;
  size_t map_size_ = 0;
};

}  // namespace leanseq::data

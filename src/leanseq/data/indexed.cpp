#include "leanseq/data/indexed.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"

namespace leanseq::data {
namespace {
constexpr char kMagic[8] = {'L', 'S', 'Q', 'I', 'D', 'X', '0', '1'};
constexpr char kFairseqMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr char kLegacyMagic[8] = {'T', 'N', 'T', 'I', 'D', 'X', '\0', '\0'};

void write_file(const std::string& path, const void* data, size_t bytes, const void* header,
                size_t header_bytes) {
  io::atomic_write(path, [&](const std::string& tmp) {
    io::FileWriter out(tmp);
    if (header_bytes) out.write(header, header_bytes);
    out.write(data, bytes);
    out.close();
  });
}
}  // namespace

IndexedWriter::IndexedWriter(std::string spill) : spill_(std::move(spill)) {
  bin_ = std::make_unique<io::FileWriter>(spill_ + ".bin");
  offsets_file_ = std::make_unique<io::FileWriter>(spill_ + ".offsets");
}

IndexedWriter::~IndexedWriter() {
  if (!spill_.empty()) {
    std::error_code ec;
    std::filesystem::remove(spill_ + ".bin", ec);
    std::filesystem::remove(spill_ + ".offsets", ec);
  }
}

void IndexedWriter::add(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) tokens_.push_back(static_cast<int32_t>(id));
  total_tokens_ += static_cast<int64_t>(ids.size());
  offsets_.push_back(total_tokens_);
  ++count_;
  if (!spill_.empty() && (tokens_.size() >= kBufferEntries || offsets_.size() >= kBufferEntries)) flush();
}

void IndexedWriter::flush() {
  bin_->write(tokens_.data(), tokens_.size() * sizeof(int32_t));
  offsets_file_->write(offsets_.data(), offsets_.size() * sizeof(int64_t));
  tokens_.clear();
  offsets_.clear();
}

void IndexedWriter::save(const std::string& prefix) {
  char header[16];
  std::memcpy(header, kMagic, 8);
  std::memcpy(header + 8, &count_, 8);
  if (spill_.empty()) {
    write_file(prefix + ".bin", tokens_.data(), tokens_.size() * sizeof(int32_t), nullptr, 0);
    write_file(prefix + ".idx", offsets_.data(), offsets_.size() * sizeof(int64_t), header, 16);
    return;
  }
  flush();
  bin_->close();
  offsets_file_->close();
  io::atomic_write(prefix + ".idx", [&](const std::string& tmp) {
    io::FileWriter out(tmp);
    out.write(header, 16);
    std::ifstream in(spill_ + ".offsets", std::ios::binary);
    std::vector<char> chunk(size_t{1} << 20);
    while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
      out.write(chunk.data(), static_cast<size_t>(in.gcount()));
    }
    out.close();
  });
  std::filesystem::rename(spill_ + ".bin", prefix + ".bin");
}

namespace {

// fairseq's dtype codes (fairseq 0.12 data/indexed_dataset.py) of the integer types token ids are
// stored in: {bytes, signed}; {0, false} for the others.
std::pair<int, bool> fairseq_element(uint8_t code) {
  switch (code) {
    case 1: return {1, false};  // uint8
    case 2: return {1, true};   // int8
    case 3: return {2, true};   // int16
    case 4: return {4, true};   // int32
    case 5: return {8, true};   // int64
    case 8: return {2, false};  // uint16
    case 9: return {4, false};  // uint32
    case 10: return {8, false}; // uint64
    default: return {0, false};
  }
}
}  // namespace

// leanseq's index: its magic, the count N and N + 1 offsets in ids.
void IndexedDataset::read_leanseq_index(std::ifstream& in, const std::string& idx, uint64_t file_size) {
  char header[16];
  in.seekg(0);
  in.read(header, 16);
  int64_t n;
  std::memcpy(&n, header + 8, 8);
  // The count must be what the file holds: N + 1 offsets after the header (checked before any
  // allocation), starting at 0, never decreasing.
  const uint64_t entries = (file_size - 16) / 8;
  if (n < 0 || (file_size - 16) % 8 != 0 || static_cast<uint64_t>(n) + 1 != entries) {
    throw DataError(idx + ": its header says " + std::to_string(n) + " sentences but the file holds " +
                    std::to_string(entries) + " offsets (" + std::to_string(file_size) + " bytes); truncated or damaged");
  }
  offsets_.resize(static_cast<size_t>(entries));
  in.seekg(16);
  in.read(reinterpret_cast<char*>(offsets_.data()), static_cast<std::streamsize>(offsets_.size() * 8));
  if (!in) throw DataError(idx + ": truncated index (expected " + std::to_string(n + 1) + " offsets)");
  if (offsets_.front() != 0) throw DataError(idx + ": damaged index: the first offset is not 0");
  for (size_t i = 1; i < offsets_.size(); ++i) {
    if (offsets_[i] < offsets_[i - 1]) {
      throw DataError(idx + ": damaged index: offset " + std::to_string(i) + " is smaller than the one before");
    }
  }
}

// fairseq's MMapIndexedDataset index (fairseq-preprocess's default): a 9-byte magic, version 1,
// the ids' dtype code, the count N, N int32 sizes and N int64 byte pointers, which must lay the
// sentences back to back.
void IndexedDataset::read_fairseq_index(std::ifstream& in, const std::string& idx, uint64_t file_size) {
  constexpr uint64_t kHeader = 9 + 8 + 1 + 8;
  char header[kHeader];
  in.seekg(0);
  in.read(header, kHeader);
  if (!in) throw DataError(idx + ": truncated fairseq index header");
  uint64_t version, n;
  std::memcpy(&version, header + 9, 8);
  std::memcpy(&n, header + 18, 8);
  if (version != 1) throw DataError(idx + ": fairseq index version " + std::to_string(version) + " (only 1 is known)");
  const auto [bytes, is_signed] = fairseq_element(static_cast<uint8_t>(header[17]));
  if (bytes == 0) {
    throw DataError(idx + ": fairseq dtype code " + std::to_string(static_cast<uint8_t>(header[17])) +
                    " is not an integer type token ids are stored in");
  }
  elem_bytes_ = bytes, elem_signed_ = is_signed;
  if (n > (uint64_t{1} << 40) || kHeader + 12 * n != file_size) {
    throw DataError(idx + ": its header says " + std::to_string(n) + " sentences but the file has " +
                    std::to_string(file_size) + " bytes (" + std::to_string(kHeader) +
                    " + 12 per sentence expected); truncated, damaged, or not fairseq 0.12's layout");
  }
  std::vector<int32_t> sizes(static_cast<size_t>(n));
  std::vector<int64_t> pointers(static_cast<size_t>(n));
  in.read(reinterpret_cast<char*>(sizes.data()), static_cast<std::streamsize>(n * 4));
  in.read(reinterpret_cast<char*>(pointers.data()), static_cast<std::streamsize>(n * 8));
  if (!in) throw DataError(idx + ": truncated fairseq index");
  offsets_.assign(static_cast<size_t>(n) + 1, 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0 || pointers[i] != offsets_[i] * bytes) {
      throw DataError(idx + ": damaged fairseq index: sentence " + std::to_string(i) +
                      (sizes[i] < 0 ? " has a negative size" : " does not follow the one before in the data file"));
    }
    offsets_[i + 1] = offsets_[i] + sizes[i];
  }
}

// fairseq's IndexedDataset index (--dataset-impl lazy or cached; TorchNet's layout): an 8-byte
// magic, version 1, the dtype code and element size, the count N and the number of sizes S, N + 1
// dimension offsets, N + 1 data offsets (in elements) and S sizes; one dimension per sentence.
// The data holds each id + 1 (Lua's indexing), which fairseq's reader takes off again.
void IndexedDataset::read_legacy_index(std::ifstream& in, const std::string& idx, uint64_t file_size) {
  constexpr uint64_t kHeader = 8 + 8 + 16 + 16;
  uint64_t h[5];
  in.seekg(8);
  in.read(reinterpret_cast<char*>(h), sizeof h);
  if (!in) throw DataError(idx + ": truncated fairseq (lazy/cached) index header");
  const uint64_t version = h[0], code = h[1], element_size = h[2], n = h[3], sizes_count = h[4];
  if (version != 1) throw DataError(idx + ": fairseq index version " + std::to_string(version) + " (only 1 is known)");
  const auto [bytes, is_signed] = fairseq_element(code < 256 ? static_cast<uint8_t>(code) : 0);
  if (bytes == 0 || static_cast<uint64_t>(bytes) != element_size) {
    throw DataError(idx + ": fairseq dtype code " + std::to_string(code) + " with " + std::to_string(element_size) +
                    "-byte elements is not an integer type token ids are stored in");
  }
  if (n > (uint64_t{1} << 40) || sizes_count != n || kHeader + 8 * (2 * (n + 1) + sizes_count) != file_size) {
    throw DataError(idx + ": its header says " + std::to_string(n) + " sentences and " + std::to_string(sizes_count) +
                    " sizes but the file has " + std::to_string(file_size) +
                    " bytes; truncated, damaged, or not one-dimensional sentences");
  }
  elem_bytes_ = bytes, elem_signed_ = is_signed, id_shift_ = 1;
  std::vector<int64_t> dims(static_cast<size_t>(n) + 1), sizes(static_cast<size_t>(n));
  offsets_.assign(static_cast<size_t>(n) + 1, 0);
  in.read(reinterpret_cast<char*>(dims.data()), static_cast<std::streamsize>(dims.size() * 8));
  in.read(reinterpret_cast<char*>(offsets_.data()), static_cast<std::streamsize>(offsets_.size() * 8));
  in.read(reinterpret_cast<char*>(sizes.data()), static_cast<std::streamsize>(sizes.size() * 8));
  if (!in) throw DataError(idx + ": truncated fairseq (lazy/cached) index");
  if (offsets_.front() != 0 || dims.front() != 0) throw DataError(idx + ": damaged index: the first offset is not 0");
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (dims[i + 1] != dims[i] + 1 || offsets_[i + 1] - offsets_[i] != sizes[i] || sizes[i] < 0) {
      throw DataError(idx + ": damaged fairseq index: sentence " + std::to_string(i) +
                      "'s offsets do not match its size (or it is not one-dimensional)");
    }
  }
}

IndexedDataset::IndexedDataset(const std::string& prefix) {
  const std::string idx = prefix + ".idx", bin = prefix + ".bin";
  std::ifstream in(idx, std::ios::binary);
  if (!in) {
    if (io::file_exists(prefix)) {  // fairseq-preprocess --dataset-impl raw writes the text itself
      throw DataError(idx + ": missing, and " + prefix + " is text: a --dataset-impl raw directory, which leanseq does "
                      "not read; binarize it (fairseq-preprocess's default, mmap)");
    }
    throw DataError(idx + ": cannot open binarized index (run 'leanseq prepare' first)");
  }
  char magic[9] = {};
  in.read(magic, 9);
  in.clear();
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  if (file_size >= 16 && std::memcmp(magic, kMagic, 8) == 0) {
    read_leanseq_index(in, idx, file_size);
  } else if (file_size >= 9 && std::memcmp(magic, kFairseqMagic, 9) == 0) {
    read_fairseq_index(in, idx, file_size);
  } else if (file_size >= 8 && std::memcmp(magic, kLegacyMagic, 8) == 0) {
    read_legacy_index(in, idx, file_size);
  } else {
    throw DataError(idx + ": not a binarized index of leanseq or of fairseq-preprocess (mmap, lazy or cached; bad magic)");
  }
  if (offsets_.back() > (int64_t{1} << 60)) throw DataError(idx + ": damaged index: impossible last offset");
  int fd = ::open(bin.c_str(), O_RDONLY);
  if (fd < 0) throw DataError(bin + ": cannot open binarized data");
  struct stat st;
  ::fstat(fd, &st);
  map_size_ = static_cast<size_t>(st.st_size);
  if (map_size_ != static_cast<size_t>(offsets_.back()) * static_cast<size_t>(elem_bytes_)) {
    ::close(fd);
    throw DataError(bin + ": size " + std::to_string(map_size_) + " bytes does not match its index (" +
                    std::to_string(offsets_.back() * elem_bytes_) + " expected); the file is truncated or stale");
  }
  if (map_size_ > 0) {
    map_ = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      ::close(fd);
      throw DataError(bin + ": mmap failed");
    }
  }
  ::close(fd);
}

IndexedDataset::IndexedDataset(IndexedDataset&& o) noexcept
    : offsets_(std::move(o.offsets_)),
      map_(o.map_),
      map_size_(o.map_size_),
      elem_bytes_(o.elem_bytes_),
      elem_signed_(o.elem_signed_),
      id_shift_(o.id_shift_) {
  o.map_ = nullptr;
  o.map_size_ = 0;
}

IndexedDataset::~IndexedDataset() {
  if (map_) ::munmap(map_, map_size_);
}

FairseqIndexedWriter::FairseqIndexedWriter(std::string prefix, int64_t vocab_size)
    : prefix_(std::move(prefix)), elem_bytes_(vocab_size < 65500 ? 2 : 4) {
  bin_ = std::make_unique<io::FileWriter>(prefix_ + ".bin.part");
}

FairseqIndexedWriter::~FairseqIndexedWriter() {
  if (finished_) return;
  std::error_code ec;
  bin_.reset();
  std::filesystem::remove(prefix_ + ".bin.part", ec);
}

void FairseqIndexedWriter::add(const std::vector<int64_t>& ids) {
  if (ids.size() > static_cast<size_t>(INT32_MAX)) throw DataError(prefix_ + ": a sentence of more than 2^31 ids");
  for (int64_t id : ids) {
    if (elem_bytes_ == 2) {
      const auto v = static_cast<uint16_t>(id);
      bin_->write(&v, 2);
    } else {
      const auto v = static_cast<int32_t>(id);
      bin_->write(&v, 4);
    }
  }
  sizes_.push_back(static_cast<int32_t>(ids.size()));
}

void FairseqIndexedWriter::finish() {
  bin_->close();
  std::string header(kFairseqMagic, 9);
  auto put = [&header](uint64_t v, int bytes) {
    for (int k = 0; k < bytes; ++k) header.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
  };
  put(1, 8);                           // version
  put(elem_bytes_ == 2 ? 8 : 4, 1);    // uint16 or int32
  put(sizes_.size(), 8);
  std::vector<int64_t> pointers(sizes_.size());
  int64_t at = 0;
  for (size_t i = 0; i < sizes_.size(); ++i) pointers[i] = at, at += int64_t{sizes_[i]} * elem_bytes_;
  io::atomic_write(prefix_ + ".idx", [&](const std::string& tmp) {
    io::FileWriter out(tmp);
    out.write(header.data(), header.size());
    out.write(sizes_.data(), sizes_.size() * sizeof(int32_t));
    out.write(pointers.data(), pointers.size() * sizeof(int64_t));
    out.close();
  });
  std::filesystem::rename(prefix_ + ".bin.part", prefix_ + ".bin");
  finished_ = true;
}

std::vector<int64_t> IndexedDataset::get(size_t i) const {
  const auto n = static_cast<size_t>(length(i));
  std::vector<int64_t> ids(n);
  const auto* base = static_cast<const unsigned char*>(map_) + static_cast<size_t>(offsets_[i]) * elem_bytes_;
  auto read = [&](auto type_tag) {
    using T = decltype(type_tag);
    for (size_t k = 0; k < n; ++k) {
      T v;
      std::memcpy(&v, base + k * sizeof(T), sizeof(T));
      ids[k] = static_cast<int64_t>(v) - id_shift_;
    }
  };
  switch (elem_bytes_ * 2 + (elem_signed_ ? 1 : 0)) {
    case 2: read(uint8_t{}); break;
    case 3: read(int8_t{}); break;
    case 4: read(uint16_t{}); break;
    case 5: read(int16_t{}); break;
    case 8: read(uint32_t{}); break;
    case 9: read(int32_t{}); break;
    case 16: read(uint64_t{}); break;
    default: read(int64_t{}); break;
  }
  return ids;
}

std::vector<int64_t> checked_sentence(const IndexedDataset& set, size_t i, int64_t dict_size, const std::string& path,
                                      int64_t limit, const std::string& limit_name) {
  if (limit > 0 && set.length(i) > limit) {
    throw DataError(path + ".bin: sentence " + std::to_string(i) + " has " + std::to_string(set.length(i)) +
                    " tokens, more than " + limit_name + " " + std::to_string(limit));
  }
  auto ids = set.get(i);
  for (int64_t id : ids) {
    if (id < 0 || id >= dict_size) {
      throw DataError(path + ".bin: sentence " + std::to_string(i) + " holds token id " + std::to_string(id) +
                      ", outside its dictionary of " + std::to_string(dict_size) + " symbols");
    }
  }
  return ids;
}

std::vector<std::vector<int64_t>> checked_sentences(const IndexedDataset& set, int64_t dict_size, const std::string& path) {
  std::vector<std::vector<int64_t>> out;
  out.reserve(set.size());
  for (size_t i = 0; i < set.size(); ++i) out.push_back(checked_sentence(set, i, dict_size, path));
  return out;
}

}  // namespace leanseq::data

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

IndexedDataset::IndexedDataset(const std::string& prefix) {
  const std::string idx = prefix + ".idx", bin = prefix + ".bin";
  std::ifstream in(idx, std::ios::binary);
  if (!in) throw DataError(idx + ": cannot open binarized index (run 'leanseq prepare' first)");
  char header[16];
  in.read(header, 16);
  if (!in || std::memcmp(header, kMagic, 8) != 0) {
    throw DataError(idx + ": not a leanseq binarized index (bad magic)");
  }
  int64_t n;
  std::memcpy(&n, header + 8, 8);
  // The count must be what the file holds: N + 1 offsets after the header (checked before any
  // allocation), starting at 0, never decreasing.
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
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
  if (offsets_.back() > (int64_t{1} << 60)) throw DataError(idx + ": damaged index: impossible last offset");
  int fd = ::open(bin.c_str(), O_RDONLY);
  if (fd < 0) throw DataError(bin + ": cannot open binarized data");
  struct stat st;
  ::fstat(fd, &st);
  map_size_ = static_cast<size_t>(st.st_size);
  if (map_size_ != static_cast<size_t>(offsets_.back()) * sizeof(int32_t)) {
    ::close(fd);
    throw DataError(bin + ": size " + std::to_string(map_size_) + " bytes does not match its index (" +
                    std::to_string(offsets_.back() * 4) + " expected); the file is truncated or stale");
  }
  if (map_size_ > 0) {
    map_ = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map_ == MAP_FAILED) {
      ::close(fd);
      throw DataError(bin + ": mmap failed");
    }
    data_ = static_cast<const int32_t*>(map_);
  }
  ::close(fd);
}

IndexedDataset::IndexedDataset(IndexedDataset&& o) noexcept
    : offsets_(std::move(o.offsets_)), data_(o.data_), map_(o.map_), map_size_(o.map_size_) {
  o.map_ = nullptr;
  o.data_ = nullptr;
  o.map_size_ = 0;
}

IndexedDataset::~IndexedDataset() {
  if (map_) ::munmap(map_, map_size_);
}

std::vector<int64_t> IndexedDataset::get(size_t i) const {
  const int32_t* p = tokens(i);
  return std::vector<int64_t>(p, p + length(i));
}

}  // namespace leanseq::data

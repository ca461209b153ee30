// Reading the zip archives that torch.save and LibTorch's serialize write, and Argos Translate's packages (stored records, deflated ones,
// zip64 when large) with every size and offset from the file checked against the file's size before it
// is used, and each record's CRC32 checked against its bytes (zlib's crc32), so that a truncated,
// forged or corrupted archive is refused by name instead of read.
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "leanseq/core/error.h"

namespace leanseq::zip {

// What is wrong with an archive, without its path (the caller adds it).
class ZipError : public Error {
 public:
  using Error::Error;
};

struct Record {
  uint64_t offset = 0, size = 0;  // of the record's bytes in the file (compressed ones: as stored)
  uint64_t unpacked_size = 0;     // its size once inflated (= size when stored)
  uint32_t crc32 = 0;             // of the unpacked bytes, as the central directory gives it
  int method = 0;                 // 0: stored, 8: deflated
};

class Reader {
 public:
  // Opens `path` (ZipError when it cannot be opened).
  explicit Reader(const std::string& path);
  uint64_t file_size() const { return size_; }
  // `size` bytes at `offset`; ZipError when they run past the end of the file.
  std::string read_at(uint64_t offset, uint64_t size);
  // Whether the file starts with a zip local header.
  bool starts_like_zip();
  // The records by name, from the central directory (read once). ZipError for a damaged
  // directory, a compression method other than stored or deflated, or a record that runs past
  // the end of the file.
  const std::map<std::string, Record>& records();
  // The bytes of stored record `name`, their CRC32 checked (ZipError naming the record otherwise,
  // or when it is compressed).
  std::string read(const std::string& name);
  // Checks the CRC32 (and a deflated record's size) of every record, reading the file in pieces.
  void verify_all();
  // Hands record `name`'s bytes (inflated when deflated, never more than its declared size) to
  // `sink` in pieces, then checks its CRC32: ZipError naming the record when it does not match
  // (the sink has had the bytes by then: write them where a failure can throw them away).
  void extract(const std::string& name, const std::function<void(const char*, uint64_t)>& sink);

 private:
  void read_directory();
  void stream(const std::string& name, const Record& r, const std::function<void(const char*, uint64_t)>& sink);
  void inflate_record(const std::string& name, const Record& r, const std::function<void(const char*, uint64_t)>& sink);
  std::ifstream in_;
  uint64_t size_ = 0;
  bool have_directory_ = false;
  std::map<std::string, Record> records_;
};

// The n-byte little-endian unsigned integer at s[at] (the caller checks the bounds).
uint64_t little_endian(const std::string& s, size_t at, int n);

// zlib's CRC32 of `size` bytes, continuing `crc` (0 to start).
uint32_t crc32(const void* data, uint64_t size, uint32_t crc = 0);
// ZipError naming `name` when `bytes` do not have the CRC32 `expected`.
void check_crc(const std::string& name, const std::string& bytes, uint32_t expected);

}  // namespace leanseq::zip

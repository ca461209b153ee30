#include "leanseq/core/zip.h"

#include <zlib.h>

#include <algorithm>

namespace leanseq::zip {

uint64_t little_endian(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

namespace {

uint64_t le(const std::string& s, size_t at, int n) { return little_endian(s, at, n); }

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50, kEnd = 0x06054b50;
constexpr uint32_t kEnd64 = 0x06064b50, kEnd64Locator = 0x07064b50;
constexpr uint64_t kPiece = 1 << 20;  // bytes read at a time to check a CRC

std::string hex(uint32_t v) {
  char s[16];
  std::snprintf(s, sizeof s, "%08x", v);
  return s;
}

void expect_crc(const std::string& name, uint32_t got, uint32_t expected) {
  if (got != expected) {
    throw ZipError("record " + name + " is corrupted: its bytes have CRC32 " + hex(got) + ", the archive says " +
                   hex(expected));
  }
}

}  // namespace

uint32_t crc32(const void* data, uint64_t size, uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {
    const auto n = static_cast<uInt>(std::min<uint64_t>(size, 1u << 30));
    crc = static_cast<uint32_t>(::crc32(crc, p, n));
    p += n;
    size -= n;
  }
  return crc;
}

void check_crc(const std::string& name, const std::string& bytes, uint32_t expected) {
  expect_crc(name, crc32(bytes.data(), bytes.size()), expected);
}

Reader::Reader(const std::string& path) {
  in_.open(path, std::ios::binary);
  if (!in_) throw ZipError("cannot open the file");
  in_.seekg(0, std::ios::end);
  size_ = static_cast<uint64_t>(in_.tellg());
}

std::string Reader::read_at(uint64_t offset, uint64_t size) {
  if (offset > size_ || size > size_ - offset) {
    throw ZipError("a record at byte " + std::to_string(offset) + " of " + std::to_string(size) +
                   " bytes runs past the end (" + std::to_string(size_) + " bytes): truncated?");
  }
  std::string out(size, '\0');
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offset));
  in_.read(out.data(), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in_.gcount()) != size) throw ZipError("a read failed at byte " + std::to_string(offset));
  return out;
}

bool Reader::starts_like_zip() { return size_ >= 4 && le(read_at(0, 4), 0, 4) == kLocalHeader; }

const std::map<std::string, Record>& Reader::records() {
  if (!have_directory_) read_directory();
  return records_;
}

void Reader::read_directory() {
  // The end-of-central-directory record is in the last 64 KiB + 22 bytes.
  const uint64_t tail_size = std::min<uint64_t>(size_, 65536 + 22);
  const std::string tail = read_at(size_ - tail_size, tail_size);
  size_t end = std::string::npos;
  for (size_t i = tail.size() >= 22 ? tail.size() - 22 + 1 : 0; i-- > 0;) {
    if (le(tail, i, 4) == kEnd) {
      end = i;
      break;
    }
  }
  if (end == std::string::npos) throw ZipError("a zip archive without its central directory (truncated?)");
  uint64_t entries = le(tail, end + 10, 2), cd_size = le(tail, end + 12, 4), cd_offset = le(tail, end + 16, 4);
  if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {  // zip64
    if (end < 20 || le(tail, end - 20, 4) != kEnd64Locator) throw ZipError("a zip64 archive without its locator");
    const std::string rec = read_at(le(tail, end - 20 + 8, 8), 56);
    if (le(rec, 0, 4) != kEnd64) throw ZipError("a zip64 archive without its end record");
    entries = le(rec, 32, 8), cd_size = le(rec, 40, 8), cd_offset = le(rec, 48, 8);
  }
  if (entries > size_ / 46) throw ZipError("a central directory claiming " + std::to_string(entries) + " entries");
  const std::string cd = read_at(cd_offset, cd_size);
  size_t p = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    if (cd.size() < 46 || p > cd.size() - 46 || le(cd, p, 4) != kCentralHeader) {
      throw ZipError("a damaged central directory");
    }
    const uint64_t method = le(cd, p + 10, 2), name_len = le(cd, p + 28, 2), extra_len = le(cd, p + 30, 2),
                   comment_len = le(cd, p + 32, 2);
    const auto crc = static_cast<uint32_t>(le(cd, p + 16, 4));
    uint64_t csize = le(cd, p + 20, 4), usize = le(cd, p + 24, 4), local = le(cd, p + 42, 4);
    if (46 + name_len + extra_len + comment_len > cd.size() - p) throw ZipError("a damaged central directory");
    const std::string name = cd.substr(p + 46, name_len);
    // zip64 sizes and offset, in this order, for the fields that say 0xFFFFFFFF.
    const size_t extra_end = p + 46 + name_len + extra_len;
    for (size_t x = p + 46 + name_len; x + 4 <= extra_end;) {
      const uint64_t id = le(cd, x, 2), len = le(cd, x + 2, 2);
      if (len > extra_end - x - 4) throw ZipError("a damaged zip64 field");
      if (id == 1) {
        size_t q = x + 4;
        auto next = [&](uint64_t& field) {
          if (field != 0xFFFFFFFF) return;
          if (q + 8 > x + 4 + len) throw ZipError("a damaged zip64 field");
          field = le(cd, q, 8);
          q += 8;
        };
        next(usize), next(csize), next(local);
      }
      x += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;
    if (method != 0 && method != 8) {
      throw ZipError("record " + name + " has compression method " + std::to_string(method) + " (not stored or deflated)");
    }
    if (method == 0 && csize != usize) throw ZipError("stored record " + name + " has two sizes");
    const std::string lh = read_at(local, 30);
    if (le(lh, 0, 4) != kLocalHeader) throw ZipError("record " + name + " has no local header");
    const uint64_t data = local + 30 + le(lh, 26, 2) + le(lh, 28, 2);  // local <= size_: no overflow
    if (data > size_ || csize > size_ - data) throw ZipError("record " + name + " runs past the end (truncated?)");
    if (!records_.emplace(name, Record{data, csize, usize, crc, static_cast<int>(method)}).second) {
      throw ZipError("record " + name + " appears twice");
    }
  }
  have_directory_ = true;
}

std::string Reader::read(const std::string& name) {
  const auto& all = records();
  auto it = all.find(name);
  if (it == all.end()) throw ZipError("no record " + name);
  if (it->second.method != 0) throw ZipError("record " + name + " is compressed; these files store it");
  std::string bytes = read_at(it->second.offset, it->second.size);
  check_crc(name, bytes, it->second.crc32);
  return bytes;
}

void Reader::verify_all() {
  for (const auto& [name, r] : records()) stream(name, r, [](const char*, uint64_t) {});
}

void Reader::extract(const std::string& name, const std::function<void(const char*, uint64_t)>& sink) {
  const auto& all = records();
  auto it = all.find(name);
  if (it == all.end()) throw ZipError("no record " + name);
  stream(name, it->second, sink);
}

void Reader::stream(const std::string& name, const Record& r, const std::function<void(const char*, uint64_t)>& sink) {
  if (r.method == 0) {
    uint32_t crc = 0;
    for (uint64_t done = 0; done < r.size;) {
      const uint64_t n = std::min(kPiece, r.size - done);
      const std::string piece = read_at(r.offset + done, n);
      crc = crc32(piece.data(), n, crc);
      sink(piece.data(), n);
      done += n;
    }
    expect_crc(name, crc, r.crc32);
  } else {
    inflate_record(name, r, sink);
  }
}

void Reader::inflate_record(const std::string& name, const Record& r,
                            const std::function<void(const char*, uint64_t)>& sink) {
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw ZipError("zlib cannot start inflating record " + name);
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  std::string out(kPiece, '\0');
  uint32_t crc = 0;
  uint64_t unpacked = 0, done = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    std::string piece;
    if (z.avail_in == 0) {
      if (done == r.size) throw ZipError("record " + name + " is corrupted: its deflated bytes end early");
      piece = read_at(r.offset + done, std::min(kPiece, r.size - done));
      done += piece.size();
      z.next_in = reinterpret_cast<Bytef*>(piece.data());
      z.avail_in = static_cast<uInt>(piece.size());
    }
    while (z.avail_in > 0 && rc != Z_STREAM_END) {
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      rc = inflate(&z, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END) throw ZipError("record " + name + " is corrupted: zlib says " + (z.msg ? z.msg : "error"));
      const uint64_t n = out.size() - z.avail_out;
      unpacked += n;
      if (unpacked > r.unpacked_size) throw ZipError("record " + name + " is corrupted: it inflates past its size");
      crc = crc32(out.data(), n, crc);
      sink(out.data(), n);
    }
  }
  if (unpacked != r.unpacked_size) throw ZipError("record " + name + " is corrupted: it inflates to fewer bytes than its size");
  expect_crc(name, crc, r.crc32);
}

}  // namespace leanseq::zip

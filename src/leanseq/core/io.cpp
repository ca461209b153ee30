#include "leanseq/core/io.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "leanseq/core/error.h"

namespace leanseq::io {

long utf8_invalid_offset(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return static_cast<long>(i);
    }
    if (i + len > n) return static_cast<long>(i);
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return static_cast<long>(i);
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Reject overlong encodings, surrogates and out-of-range code points.
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return static_cast<long>(i);
    }
    i += len;
  }
  return -1;
}

namespace {
std::vector<std::string> read_stream(std::istream& in, const std::string& path) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    long bad = utf8_invalid_offset(line);
    if (bad >= 0) {
      throw DataError(path + ":" + std::to_string(lines.size() + 1) +
                      ": invalid UTF-8 at byte " + std::to_string(bad + 1) +
                      " of the line (expected UTF-8 text)");
    }
    lines.push_back(std::move(line));
  }
  return lines;
}
}  // namespace

std::vector<std::string> read_lines(const std::string& path) {
  if (path == "-") return read_stream(std::cin, "<stdin>");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open file for reading");
  return read_stream(in, path);
}

std::vector<std::string> split_lines(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  return read_stream(in, origin);
}

bool file_exists(const std::string& path) { return std::filesystem::exists(path); }

void make_dirs(const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw Error(path + ": cannot create directory: " + ec.message());
}

void atomic_write(const std::string& path, const std::function<void(const std::string&)>& write) {
  namespace fs = std::filesystem;
  fs::path target(path);
  if (target.has_parent_path()) make_dirs(target.parent_path().string());
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    write(tmp);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(path + ": cannot rename temporary file into place: " + ec.message());
  }
}

void atomic_write_text(const std::string& path, const std::string& content) {
  atomic_write(path, [&](const std::string& tmp) {
    std::ofstream out(tmp, std::ios::binary);
    out << content;
    out.close();
    if (!out) throw Error(tmp + ": write failed");
  });
}

}  // namespace leanseq::io

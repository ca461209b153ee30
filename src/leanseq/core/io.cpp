#include "leanseq/core/io.h"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <iostream>

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

void check_utf8_line(const std::string& path, int64_t line_no, const std::string& line) {
  const long bad = utf8_invalid_offset(line);
  if (bad >= 0) {
    throw DataError(path + ":" + std::to_string(line_no) + ": invalid UTF-8 at byte " + std::to_string(bad + 1) +
                    " of the line (expected UTF-8 text)");
  }
}

namespace {
// Standard input's lines, under read_file's bound on the bytes.
std::vector<std::string> read_stream(std::istream& in, const std::string& path, uint64_t max_bytes) {
  std::vector<std::string> lines;
  std::string line;
  uint64_t bytes = 0;
  while (std::getline(in, line)) {
    bytes += line.size() + 1;
    if (bytes > max_bytes) throw DataError(path + ": the input is larger than " + std::to_string(max_bytes) + " bytes");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    check_utf8_line(path, static_cast<int64_t>(lines.size()) + 1, line);
    lines.push_back(std::move(line));
  }
  return lines;
}
}  // namespace

int open_input(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) throw DataError(path + ": " + what + " not found");
    throw DataError(path + ": cannot open the " + what + " (" + std::strerror(errno) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw DataError(path + ": cannot read the " + what + " (" + std::strerror(e) + ")");
  }
  const bool dev_null = S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3;
  const char* refused = S_ISDIR(st.st_mode)                                                  ? "a directory"
                        : (S_ISCHR(st.st_mode) && !dev_null && !::isatty(fd)) || S_ISBLK(st.st_mode) ? "a device"
                                                                                                   : nullptr;
  if (refused) {
    ::close(fd);
    throw DataError(path + ": is " + refused + ", not a file (expected the " + what + ")");
  }
  return fd;
}

std::string read_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  const int fd = open_input(path, what);
  std::string out;
  char chunk[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw DataError(path + ": cannot read the " + what + " (" + std::strerror(e) + ")");
    }
    if (n == 0) break;
    if (static_cast<uint64_t>(n) > max_bytes - out.size()) {
      ::close(fd);
      throw DataError(path + ": the " + what + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::vector<std::string> read_lines(const std::string& path, const std::string& what, uint64_t max_bytes) {
  if (path == "-") return read_stream(std::cin, "<stdin>", max_bytes);
  return split_lines(read_file(path, what, max_bytes), path);
}

std::vector<std::string> split_lines(const std::string& text, const std::string& origin) {
  std::vector<std::string> lines;
  for (size_t from = 0; from < text.size();) {
    size_t end = text.find('\n', from);
    if (end == std::string::npos) end = text.size();
    const size_t stop = end > from && text[end - 1] == '\r' ? end - 1 : end;
    lines.emplace_back(text, from, stop - from);
    check_utf8_line(origin, static_cast<int64_t>(lines.size()), lines.back());
    from = end + 1;
  }
  return lines;
}

bool file_exists(const std::string& path) { return std::filesystem::exists(path); }

void make_dirs(const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw Error(path + ": cannot create directory: " + ec.message());
}

FileWriter::FileWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path + ": cannot create: " + std::strerror(errno));
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void FileWriter::write(const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  if (buffer_.size() + size < kBufferBytes) {
    buffer_.append(p, size);
    return;
  }
  write_through(buffer_.data(), buffer_.size());
  buffer_.clear();
  if (size < kBufferBytes) {
    buffer_.append(p, size);
  } else {
    write_through(p, size);
  }
}

void FileWriter::write_through(const char* p, size_t size) {
  while (size > 0 && error_ == 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno != EINTR) error_ = errno;
      continue;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void FileWriter::close() {
  write_through(buffer_.data(), buffer_.size());
  buffer_.clear();
  if (::close(fd_) != 0 && error_ == 0) error_ = errno;
  fd_ = -1;
  if (error_ != 0) throw Error(path_ + ": " + std::strerror(error_));
}

namespace {
// The pid in the name of a temporary atomic_write makes (`<target>.tmp.<pid>.<n>`), or in that of
// one earlier versions made of checkpoints (`<name>.pt.tmp.<pid>`); 0 for any other name, so that
// a user's own `notes.tmp.42` is never taken for one.
pid_t temporary_owner(const std::string& name) {
  const auto at = name.rfind(".tmp.");
  if (at == std::string::npos) return 0;
  std::string rest = name.substr(at + 5);
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (const auto dot = rest.find('.'); dot != std::string::npos) {
    if (!digits(rest.substr(dot + 1))) return 0;
    rest.resize(dot);
  } else if (at < 3 || name.compare(at - 3, 3, ".pt") != 0) {
    return 0;
  }
  if (!digits(rest) || rest.size() > 9) return 0;
  return static_cast<pid_t>(std::stol(rest));
}

// Whether no process of this id runs on this machine (one we may not signal counts as running).
bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }
}  // namespace

int remove_stale_temporaries(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int removed = 0;
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir, ec)) {
    const pid_t pid = temporary_owner(e.path().filename().string());
    if (pid <= 0 || pid == ::getpid() || !e.is_regular_file(ec)) continue;
    if (process_gone(pid) && fs::remove(e.path(), ec)) ++removed;
  }
  return removed;
}

void atomic_write(const std::string& path, const std::function<void(const std::string&)>& write) {
  namespace fs = std::filesystem;
  static std::atomic<uint64_t> counter{0};
  fs::path target(path);
  if (target.has_parent_path()) make_dirs(target.parent_path().string());
  remove_stale_temporaries(target.parent_path().string());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  auto fail = [&](const std::string& why) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error(path + ": not written: " + why);
  };
  try {
    write(tmp);
  } catch (const c10::Error& e) {
    fail(e.what_without_backtrace());
  } catch (const std::exception& e) {
    fail(e.what());
  }
  // What the writer closed may still be in the page cache: flushed here, a full disk shows now.
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  const bool flushed = fd >= 0 && ::fsync(fd) == 0;
  const int why = errno;
  if (fd >= 0) ::close(fd);
  if (!flushed) fail(tmp + ": " + std::strerror(why));
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) fail("cannot rename " + tmp + " into place: " + ec.message());
}

void atomic_write_text(const std::string& path, const std::string& content) {
  atomic_write(path, [&](const std::string& tmp) {
    FileWriter out(tmp);
    out.write(content.data(), content.size());
    out.close();
  });
}

PrivateDirectory::PrivateDirectory(const std::string& prefix) {
  namespace fs = std::filesystem;
  const char* tmp = std::getenv("TMPDIR");
  const std::string parent = tmp && *tmp ? tmp : "/tmp";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {  // those of dead processes
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() + 1 || name.compare(0, prefix.size() + 1, prefix + "-") != 0) continue;
    const auto dash = name.find('-', prefix.size() + 1);
    if (dash == std::string::npos) continue;
    const std::string digits = name.substr(prefix.size() + 1, dash - prefix.size() - 1);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(digits));
    if (pid != ::getpid() && process_gone(pid)) fs::remove_all(e.path(), ec);
  }
  std::string pattern = parent + "/" + prefix + "-" + std::to_string(::getpid()) + "-XXXXXX";
  if (!::mkdtemp(pattern.data())) {
    throw Error(pattern + ": cannot create a private directory: " + std::strerror(errno));
  }
  path_ = pattern;
}

PrivateDirectory::~PrivateDirectory() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace leanseq::io

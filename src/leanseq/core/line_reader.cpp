#include "leanseq/core/line_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"

namespace leanseq::io {

LineReader::LineReader(const std::string& path, size_t max_line_bytes)
    : max_line_bytes_(max_line_bytes), name_(path == "-" ? "<stdin>" : path) {
  if (path == "-") {
    fd_ = 0;
  } else {
    fd_ = open_input(path);
    owned_ = true;
  }
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) size_ = static_cast<uint64_t>(st.st_size);
}

LineReader::LineReader(int fd, std::string name, size_t max_line_bytes)
    : fd_(fd), owned_(true), max_line_bytes_(max_line_bytes), name_(std::move(name)) {}

LineReader::~LineReader() {
  if (owned_) ::close(fd_);
}

bool LineReader::fill() {
  if (eof_) return false;
  if (pos_ > 0 && pos_ == buffer_.size()) buffer_.clear(), pos_ = 0;
  char chunk[1 << 16];
  ssize_t n;
  do {
    n = ::read(fd_, chunk, sizeof chunk);
  } while (n < 0 && errno == EINTR);
  if (n < 0) throw DataError(name_ + ": read failed (" + std::strerror(errno) + ")");
  if (n == 0) {
    eof_ = true;
    return false;
  }
  // Keep the buffer bounded: drop what has been consumed before growing it.
  if (pos_ > 0) buffer_.erase(0, pos_), pos_ = 0;
  buffer_.append(chunk, static_cast<size_t>(n));
  bytes_read_ += static_cast<uint64_t>(n);
  return true;
}

bool LineReader::next(std::string& line) {
  cut_ = false;
  size_t searched = 0;  // bytes after pos_ already searched for '\n'
  while (true) {
    const size_t nl = buffer_.find('\n', pos_ + searched);
    if (nl != std::string::npos) {
      if (!cut_) line.assign(buffer_, pos_, nl - pos_);
      pos_ = nl + 1;
      break;
    }
    searched = buffer_.size() - pos_;
    if (!cut_ && searched > max_line_bytes_) {
      // Keep the first max_line_bytes_ (ending at a character boundary) and skip the rest.
      size_t keep = max_line_bytes_;
      while (keep > 0 && (static_cast<unsigned char>(buffer_[pos_ + keep]) & 0xC0) == 0x80) --keep;
      line.assign(buffer_, pos_, keep);
      cut_ = true;
    }
    if (cut_) buffer_.clear(), pos_ = 0, searched = 0;
    if (!fill()) {
      if (cut_) return true;
      if (pos_ >= buffer_.size()) return false;
      line.assign(buffer_, pos_, std::string::npos);  // a last line without '\n'
      pos_ = buffer_.size();
      break;
    }
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

bool LineReader::ready() {
  if (eof_ || buffer_.find('\n', pos_) != std::string::npos) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

}  // namespace leanseq::io

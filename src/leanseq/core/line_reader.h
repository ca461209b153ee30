// Lines from a file or standard input, read as they come: next() waits for a line, ready() says
// without waiting whether one is there (a pipe that pauses has none), so that a consumer can work
// on what it has read instead of waiting for more. Reads interrupted by a signal are resumed. A line
// longer than max_line_bytes is cut to them (at a UTF-8 character boundary) and the rest of it
// skipped, so that memory stays bounded whatever the input holds, and each byte is searched for
// '\n' once however long its line.
#pragma once
#include <cstdint>
#include <string>

namespace leanseq::io {

class LineReader {
 public:
  // "-": standard input. Throws DataError naming the file when it cannot be opened.
  explicit LineReader(const std::string& path, size_t max_line_bytes = kMaxLineBytes);
  // An open descriptor (a pipe from a helper process), closed by the destructor; `name` for errors.
  LineReader(int fd, std::string name, size_t max_line_bytes = kMaxLineBytes);
  // 1 MiB: tokenizing a line costs a few hundred times its size, so a line's bound is its
  // memory's.
  static constexpr size_t kMaxLineBytes = size_t{1} << 20;
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its '\n' (and '\r'); false at the end of the input.
  bool next(std::string& line);
  // Whether the line next() returned last was longer than max_line_bytes and cut.
  bool cut() const { return cut_; }
  // Whether next() would return at once: a whole line is buffered, the input has data now, or it
  // has ended.
  bool ready();
  // How far the input has been read, and its size (0 when unknown: a pipe or a terminal).
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  bool fill();  // one read(); false at the end of the input
  int fd_ = -1;
  bool owned_ = false, eof_ = false, cut_ = false;
  size_t max_line_bytes_ = kMaxLineBytes;
  std::string name_, buffer_;
  size_t pos_ = 0;
  uint64_t bytes_read_ = 0, size_ = 0;
};

}  // namespace leanseq::io

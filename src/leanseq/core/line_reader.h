// Lines from a file or standard input, read as they come: next() waits for a line, ready() says
// without waiting whether one is there (a pipe that pauses has none), so that a consumer can work
// on what it has read instead of waiting for more. Reads interrupted by a signal are resumed.
#pragma once
#include <cstdint>
#include <string>

namespace leanseq::io {

class LineReader {
 public:
  // "-": standard input. Throws DataError naming the file when it cannot be opened.
  explicit LineReader(const std::string& path);
  // An open descriptor (a pipe from a helper process), closed by the destructor; `name` for errors.
  LineReader(int fd, std::string name);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its '\n' (and '\r'); false at the end of the input.
  bool next(std::string& line);
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
  bool owned_ = false, eof_ = false;
  std::string name_, buffer_;
  size_t pos_ = 0;
  uint64_t bytes_read_ = 0, size_ = 0;
};

}  // namespace leanseq::io

// File helpers: whole-file reads, line reading with UTF-8 validation, atomic writes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace leanseq::io {

// The most bytes a file read whole may have unless its reader says otherwise.
constexpr uint64_t kMaxFileBytes = uint64_t{1} << 31;

// Opens a file a user named for reading (O_CLOEXEC): a regular file, a pipe, a socket, a terminal
// or /dev/null. A directory or another device (/dev/zero, a disk) is refused with DataError
// "<path>: ... <what> ...", as is a missing file; `what` says which file it is ("BPE codes").
int open_input(const std::string& path, const std::string& what = "file");

// The whole of a file (open_input's rule), DataError past `max_bytes` (read, not declared: a
// pipe counts as much as a file).
std::string read_file(const std::string& path, const std::string& what = "file", uint64_t max_bytes = kMaxFileBytes);

// Reads a text file ("-": standard input, named <stdin> in errors) into lines (without '\n'; a
// trailing '\r' is kept out too), read_file's rule and bound. Throws DataError naming the file when
// it is missing, and file:line when a line is not valid UTF-8.
std::vector<std::string> read_lines(const std::string& path, const std::string& what = "file",
                                    uint64_t max_bytes = kMaxFileBytes);
// The same for text already in memory; `origin` names it in errors.
std::vector<std::string> split_lines(const std::string& text, const std::string& origin);

// Returns the byte offset of the first invalid UTF-8 sequence, or -1 when `s` is valid.
long utf8_invalid_offset(const std::string& s);
// DataError "<path>:<line_no>: invalid UTF-8 at byte N of the line" when `line` is not UTF-8.
void check_utf8_line(const std::string& path, int64_t line_no, const std::string& line);

bool file_exists(const std::string& path);

// Writes through `write(tmp_path)` into a temporary file beside `path` (`<path>.tmp.<pid>.<n>`),
// flushes it to the disk, then renames it over `path`, so that readers never see a half-written
// file. On any failure (a full disk, an I/O error) the temporary is removed, `path` is left as it
// was, and Error says "<path>: not written: <why>". Temporaries that processes no longer alive left
// in the directory (killed during a write) are removed first.
void atomic_write(const std::string& path, const std::function<void(const std::string&)>& write);

// Removes, in `dir`, the temporaries of atomic_write (`*.tmp.<pid>.<n>`) and those earlier versions
// left of checkpoints (`*.pt.tmp.<pid>`) whose process is not alive on this machine; returns how
// many. Other names are left alone.
int remove_stale_temporaries(const std::string& dir);

// A file written in pieces, small ones gathered into a buffer of kBufferBytes, that remembers the
// first error instead of throwing from inside a writer callback (LibTorch's zip writer cannot
// unwind through one): close() writes what is buffered and throws Error naming the file and the
// system's reason (ENOSPC, EIO, ...). A writer destroyed unclosed drops its buffer. Flushing to
// the disk is atomic_write's.
class FileWriter {
 public:
  explicit FileWriter(const std::string& path);  // Error when it cannot be created
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  void write(const void* data, size_t size);
  void close();
  static constexpr size_t kBufferBytes = size_t{1} << 20;

 private:
  void write_through(const char* data, size_t size);
  std::string path_;
  int fd_ = -1;
  int error_ = 0;  // the first errno
  std::string buffer_;
};

// Convenience: atomically writes a string.
void atomic_write_text(const std::string& path, const std::string& content);

// Creates a directory and its parents (no error if it exists).
void make_dirs(const std::string& path);

// A directory of its own under $TMPDIR (or /tmp), <prefix>-<pid>-XXXXXX (mkdtemp: mode 0700),
// removed with everything in it when it goes. Those of the same prefix that processes no longer
// alive left (killed, so that their destructors did not run) are removed first. Error when it
// cannot be made.
class PrivateDirectory {
 public:
  explicit PrivateDirectory(const std::string& prefix);
  ~PrivateDirectory();
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace leanseq::io

// File helpers: whole-file reads, line reading with UTF-8 validation, atomic writes.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace leanseq::io {

// Reads a text file ("-": standard input, named <stdin> in errors) into lines (without '\n'; a
// trailing '\r' is kept out too). Throws DataError naming the file when it is missing, and
// file:line when a line is not valid UTF-8.
std::vector<std::string> read_lines(const std::string& path);
// The same for text already in memory; `origin` names it in errors.
std::vector<std::string> split_lines(const std::string& text, const std::string& origin);

// Returns the byte offset of the first invalid UTF-8 sequence, or -1 when `s` is valid.
long utf8_invalid_offset(const std::string& s);

bool file_exists(const std::string& path);

// Writes through `write(tmp_path)` into a temporary file beside `path`, then renames it over
// `path`, so that readers never see a half-written file. The temporary is removed on failure.
void atomic_write(const std::string& path, const std::function<void(const std::string&)>& write);

// Convenience: atomically writes a string.
void atomic_write_text(const std::string& path, const std::string& content);

// Creates a directory and its parents (no error if it exists).
void make_dirs(const std::string& path);

}  // namespace leanseq::io

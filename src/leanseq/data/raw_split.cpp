#include "leanseq/data/raw_split.h"

#include <filesystem>

#include "leanseq/core/io.h"
#include "leanseq/core/line_reader.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/text_classification.h"

namespace leanseq::data {

std::string binarized(const std::string& prefix, const Dictionary& dict, const std::string& dir) {
  if (io::file_exists(prefix + ".idx") || !io::file_exists(prefix)) return prefix;  // (a missing one: its reader says so)
  IndexedWriter out;
  io::LineReader in(prefix);
  std::string line;
  for (int64_t n = 1; in.next(line); ++n) {
    io::check_utf8_line(prefix, n, line);
    out.add(dict.encode(split_words(line)));
  }
  const std::string path = dir + "/" + std::filesystem::path(prefix).filename().string() + ".raw";
  out.save(path);
  return path;
}

}  // namespace leanseq::data

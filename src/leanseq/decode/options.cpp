#include "leanseq/decode/options.h"

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/line_reader.h"

namespace leanseq::decode {

std::pair<std::string, std::vector<std::string>> split_constraints(const std::string& line) {
  const auto first = line.find_first_not_of(" \t\r\n\v\f");
  if (first == std::string::npos) return {};
  const auto last = line.find_last_not_of(" \t\r\n\v\f");
  const std::string text = line.substr(first, last - first + 1);
  std::vector<std::string> fields;
  for (size_t from = 0;;) {
    const auto tab = text.find('\t', from);
    fields.push_back(text.substr(from, tab == std::string::npos ? std::string::npos : tab - from));
    if (tab == std::string::npos) break;
    from = tab + 1;
  }
  std::string source = std::move(fields.front());
  fields.erase(fields.begin());
  return {std::move(source), std::move(fields)};
}

bool translatable(const std::string& line, const char** why) {
  const char* reason = line.empty() ? "empty line" : io::utf8_invalid_offset(line) >= 0 ? "invalid UTF-8" : nullptr;
  if (reason && why) *why = reason;
  return reason == nullptr;
}

std::unordered_map<std::string, std::string> read_replace_unk_dict(const std::string& path,
                                                                   const ReplaceUnkLimits& limits) {
  if (!io::file_exists(path)) throw DataError(path + ": --replace-unk dictionary not found");
  std::unordered_map<std::string, std::string> dict;
  int64_t number = 0;
  uint64_t bytes = 0;
  io::LineReader in(path, limits.max_line_bytes);
  for (std::string line; in.next(line);) {
    ++number;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    if (in.cut() || line.size() > limits.max_line_bytes) {
      throw DataError(where + "a --replace-unk line longer than " + std::to_string(limits.max_line_bytes) + " bytes");
    }
    io::check_utf8_line(path, number, line);
    bytes += line.size() + 1;
    if (bytes > limits.max_bytes) {
      throw DataError(where + "a --replace-unk dictionary past " + std::to_string(limits.max_bytes) + " bytes");
    }
    std::istringstream words(line);
    std::string source, target;
    if (!(words >> source)) continue;
    if (!(words >> target)) {
      throw DataError(path + ":" + std::to_string(number) + ": a --replace-unk line is a source and a target word, got '" +
                      line.substr(0, 200) + "'");
    }
    dict[source] = target;
    if (static_cast<int64_t>(dict.size()) > limits.max_entries) {
      throw DataError(where + "a --replace-unk dictionary of more than " + std::to_string(limits.max_entries) +
                      " words");
    }
  }
  return dict;
}

}  // namespace leanseq::decode

#include "leanseq/decode/options.h"

#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/line_reader.h"

namespace leanseq::decode {

void check_options(const TranslateOptions& opt) {
  const auto& s = opt.search;
  auto range = [](const char* name, double v, double lo, double hi) {
    if (!(v >= lo && v <= hi)) {  // NaN fails too
      std::ostringstream os;
      os << name << " must be from " << lo << " to " << hi << " (got " << v << ")";
      throw ConfigError(os.str());
    }
  };
  range("beam", static_cast<double>(s.beam), 1, kMaxBeam);
  range("nbest", static_cast<double>(s.nbest), 1, static_cast<double>(s.beam));
  range("lenpen", s.lenpen, -1e6, 1e6);
  range("max_len_a", s.max_len_a, 0, 1e6);
  range("max_len_b", static_cast<double>(s.max_len_b), 0, kMaxLenB);
  range("min_len", static_cast<double>(s.min_len), 0, kMaxLenB);
  range("unk_penalty", s.unk_penalty, -1e6, 1e6);
  range("no_repeat_ngram_size", static_cast<double>(s.no_repeat_ngram_size), 0, kMaxLenB);
  range("temperature", s.temperature, 1e-6, 1e6);
  if (s.sampling_topk != -1) range("sampling_topk", static_cast<double>(s.sampling_topk), 1, 1e9);
  if (s.sampling_topp != -1) range("sampling_topp", s.sampling_topp, 1e-9, 1);
  if (!s.sampling && (s.sampling_topk > 0 || s.sampling_topp > 0)) {
    throw ConfigError("sampling_topk and sampling_topp go with sampling");
  }
  if (s.sampling_topk > 0 && s.sampling_topp > 0) throw ConfigError("sampling_topk and sampling_topp: give one of them");
  range("batch size", static_cast<double>(opt.max_sentences), 1, 1e9);
  range("max_tokens", static_cast<double>(opt.max_tokens), 0, 1e12);
  range("max_input_length", static_cast<double>(opt.max_input_length), 0, 1e9);
  if (s.sampling && s.constraint_order != ConstraintOrder::none) {
    throw ConfigError("constraints go with beam search, not sampling");
  }
  if (io::utf8_invalid_offset(opt.prefix) >= 0) throw ConfigError("prefix: not valid UTF-8");
}

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

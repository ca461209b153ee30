#include "leanseq/data/text_classification.h"

#include <algorithm>
#include <map>
#include <limits>
#include <set>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/data/batching.h"

namespace leanseq::data {

namespace {
std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> cols;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    cols.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) break;
    start = tab + 1;
  }
  return cols;
}

std::string trimmed(const std::string& s) {
  const char* ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
}  // namespace

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (j > i) words.push_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

TextDataset read_text_tsv(const std::string& path, std::optional<bool> pair, std::optional<bool> labelled) {
  const std::string name = path == "-" ? "<stdin>" : path;
  auto lines = io::read_lines(path);
  TextDataset ds;
  ds.path = name;
  size_t first = 0;
  while (first < lines.size() && trimmed(lines[first]).empty()) ++first;
  if (first < lines.size()) {
    auto cols = split_tabs(lines[first]);
    if (cols.size() >= 2 && lower(trimmed(cols.back())) == "label") ++first;  // header
  }
  int64_t columns = 0;
  for (size_t i = first; i < lines.size(); ++i) {
    if (trimmed(lines[i]).empty()) continue;
    const int64_t line_no = static_cast<int64_t>(i) + 1;
    const std::string where = name + ":" + std::to_string(line_no);
    auto cols = split_tabs(lines[i]);
    if (columns == 0) {
      const auto found = static_cast<int64_t>(cols.size());
      if (pair) {  // the text columns are known; a label may follow
        const int64_t base = *pair ? 2 : 1;
        const bool l = labelled.value_or(found == base + 1);
        ds.pair = *pair, ds.labelled = l, columns = base + (l ? 1 : 0);
      } else {  // labelled unless told otherwise; the column count tells pairs
        const bool l = labelled.value_or(true);
        ds.labelled = l, ds.pair = found == (l ? 3 : 2), columns = found;
        if (found < (l ? 2 : 1) || found > (l ? 3 : 2)) columns = l ? 2 : 1;
      }
      if (found != columns) {
        throw DataError(where + ": expected " + std::to_string(columns) + " tab-separated column(s) (" +
                        (ds.pair ? "text1, text2" : "text") + (ds.labelled ? ", label" : "") + ") but found " +
                        std::to_string(found));
      }
    }
    if (static_cast<int64_t>(cols.size()) != columns) {
      throw DataError(where + ": expected " + std::to_string(columns) + " tab-separated columns like the first line but found " +
                      std::to_string(cols.size()));
    }
    TextExample ex;
    ex.line = line_no;
    ex.first = split_words(cols[0]);
    if (ds.pair) ex.second = split_words(cols[1]);
    if (ex.first.empty() || (ds.pair && ex.second.empty())) throw DataError(where + ": empty text");
    if (ds.labelled) {
      ex.label = trimmed(cols.back());
      if (ex.label.empty()) throw DataError(where + ": empty label");
    }
    ds.examples.push_back(std::move(ex));
  }
  if (ds.examples.empty()) throw DataError(name + ": no examples (expected tab-separated lines of text and label)");
  return ds;
}

Dictionary build_word_dictionary(const TextDataset& data, int64_t min_count) {
  Dictionary dict;
  for (const auto& ex : data.examples) {
    for (const auto& w : ex.first) dict.add(w);
    for (const auto& w : ex.second) dict.add(w);
  }
  dict.finalize(std::max<int64_t>(min_count, 1));
  return dict;
}

std::vector<std::string> collect_labels(const TextDataset& data) {
  std::set<std::string> labels;
  for (const auto& ex : data.examples) labels.insert(ex.label);
  return {labels.begin(), labels.end()};
}

int64_t label_index(const std::vector<std::string>& labels, const std::string& label, const std::string& path,
                    int64_t line) {
  auto it = std::lower_bound(labels.begin(), labels.end(), label);
  if (it == labels.end() || *it != label) {
    std::string known;
    for (const auto& l : labels) known += (known.empty() ? "" : ", ") + l;
    throw DataError(path + ":" + std::to_string(line) + ": label '" + label + "' is not one of the training labels (" +
                    known + ")");
  }
  return it - labels.begin();
}

std::vector<std::pair<int64_t, int64_t>> EncodedText::lengths() const {
  std::vector<std::pair<int64_t, int64_t>> out(first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    out[i] = {static_cast<int64_t>(first[i].size()), second.empty() ? 0 : static_cast<int64_t>(second[i].size())};
  }
  return out;
}

EncodedText encode_text(const TextDataset& data, const Dictionary& dict, const std::vector<std::string>& labels) {
  EncodedText enc;
  for (const auto& ex : data.examples) {
    enc.first.push_back(dict.encode(ex.first, false));
    if (data.pair) enc.second.push_back(dict.encode(ex.second, false));
    enc.labels.push_back(data.labelled ? label_index(labels, ex.label, data.path, ex.line) : -1);
  }
  return enc;
}

namespace {
torch::Tensor pad_rows(const std::vector<std::vector<int64_t>>& rows, const std::vector<int64_t>& ids) {
  size_t width = 1;
  for (auto i : ids) width = std::max(width, rows[i].size());
  auto t = torch::full({static_cast<int64_t>(ids.size()), static_cast<int64_t>(width)}, Dictionary::kPad, torch::kLong);
  auto* p = t.data_ptr<int64_t>();
  for (size_t r = 0; r < ids.size(); ++r) std::copy(rows[ids[r]].begin(), rows[ids[r]].end(), p + r * width);
  return t;
}
}  // namespace

TextBatch collate_text(const EncodedText& data, const std::vector<int64_t>& ids) {
  TextBatch b;
  b.ids = ids;
  b.tokens = pad_rows(data.first, ids);
  if (!data.second.empty()) b.tokens2 = pad_rows(data.second, ids);
  b.labels = torch::empty({static_cast<int64_t>(ids.size())}, torch::kLong);
  for (size_t r = 0; r < ids.size(); ++r) b.labels[static_cast<int64_t>(r)] = data.labels[ids[r]];
  return b;
}

TextBatch TextBatch::to(const torch::Device& device) const {
  TextBatch b = *this;
  b.tokens = tokens.to(device);
  if (tokens2.defined()) b.tokens2 = tokens2.to(device);
  b.labels = labels.to(device);
  return b;
}

std::vector<std::vector<int64_t>> batch_text_by_size(const EncodedText& data, int64_t max_sentences,
                                                     int64_t max_tokens) {
  BatchingOptions bo;
  bo.max_sentences = max_sentences;
  bo.max_tokens = max_tokens > 0 ? max_tokens : std::numeric_limits<int64_t>::max() / 4;
  return batch_by_size(data.lengths(), bo);
}

}  // namespace leanseq::data

// Labelled text for classification: TSV files of "text<TAB>label" or, for sentence pairs,
// "text1<TAB>text2<TAB>label" (a first line whose last column is "label" is a header). Text is
// taken as already tokenized: words are separated by whitespace.
#pragma once
#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "leanseq/data/dictionary.h"

namespace leanseq::data {

struct TextExample {
  std::vector<std::string> first, second;  // words (second: pairs only)
  std::string label;                       // empty when the file has no labels
  int64_t line = 0;                        // 1-based line in the file
};

struct TextDataset {
  std::string path;
  bool pair = false, labelled = false;
  std::vector<TextExample> examples;
};

// Reads a TSV file ("-": standard input). `pair`: whether examples are sentence pairs; `labelled`:
// whether the last column is a label; either left unset is inferred from the first data line
// (2 columns: text + label, or a pair without labels when `labelled` is false...). Throws
// DataError naming file:line for a wrong column count, an empty text, invalid UTF-8 or an empty file.
TextDataset read_text_tsv(const std::string& path, std::optional<bool> pair, std::optional<bool> labelled);

// Whitespace-separated words of `text`.
std::vector<std::string> split_words(const std::string& text);

// The word dictionary of a dataset's texts (words seen fewer than min_count times are left to <unk>).
Dictionary build_word_dictionary(const TextDataset& data, int64_t min_count);

// The sorted distinct labels of a dataset.
std::vector<std::string> collect_labels(const TextDataset& data);
// The index of `label` in `labels`; throws DataError naming path:line when it is not there.
int64_t label_index(const std::vector<std::string>& labels, const std::string& label, const std::string& path,
                    int64_t line);

// Word ids of every example (no </s>), as used by the classifiers.
struct EncodedText {
  std::vector<std::vector<int64_t>> first, second;
  std::vector<int64_t> labels;  // -1 when unlabelled
  // {first length, second length} per example, for batch_by_size.
  std::vector<std::pair<int64_t, int64_t>> lengths() const;
};
EncodedText encode_text(const TextDataset& data, const Dictionary& dict, const std::vector<std::string>& labels);

struct TextBatch {
  torch::Tensor tokens, tokens2;  // [B, T] int64, right-padded with <pad>=1 (tokens2: pairs only)
  torch::Tensor labels;           // [B] int64 (unlabelled: -1)
  std::vector<int64_t> ids;
  TextBatch to(const torch::Device& device) const;
};
TextBatch collate_text(const EncodedText& data, const std::vector<int64_t>& ids);

// Batches of examples of similar length, at most `max_sentences` each and, when `max_tokens` > 0,
// at most that many padded tokens (data/batching.h's batch_by_size).
std::vector<std::vector<int64_t>> batch_text_by_size(const EncodedText& data, int64_t max_sentences,
                                                     int64_t max_tokens);

}  // namespace leanseq::data

// `leanseq prepare`: subword model, dictionaries and binarized splits of a parallel corpus.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace leanseq::data {

struct PrepareOptions {
  // With language_model, a monolingual corpus in tgt_lang (<prefix>.<tgt_lang>) for a language
  // model; src_lang stays empty.
  bool language_model = false;
  std::string src_lang, tgt_lang;
  std::string train, valid, test;  // file prefixes: <prefix>.<lang>; test may be empty
  std::string out_dir;
  int64_t vocab_size = 8000;
  bool joint = true;               // one SentencePiece model and dictionary for both languages
  std::string spm_model;           // reuse this (joint) model instead of training one
  std::string model_type = "unigram";
  int64_t min_len = 1, max_len = 250;  // in subword tokens, applied to train only
  double max_ratio = 3.0;              // max length ratio, applied to train only (<= 0: off)
  int64_t workers = 1;                 // SentencePiece encoders at once (fairseq's --workers)
  bool dedup = false;                  // leave out exact duplicates of an earlier training pair
  int64_t shard_size = 0;              // training pairs per shard directory (0: one directory)
  int64_t spm_sample_mb = 64;          // megabytes of training text SentencePiece trains on at most
                                       // (pairs sampled at random; its memory is about 23x this)
};

struct SplitCounts {
  std::string name;
  int64_t lines = 0, kept = 0, duplicates = 0, src_tokens = 0, tgt_tokens = 0, src_unk = 0, tgt_unk = 0;
};

struct PrepareReport {
  bool language_model = false;
  std::vector<SplitCounts> splits;
  int64_t src_vocab = 0, tgt_vocab = 0;
  std::vector<std::string> shards;  // the train shards' directories, relative to the output
  int64_t shard_size = 0;
  std::string format() const;
};

// Runs the whole preparation. Every input is validated (present, non-empty, valid UTF-8, equal
// line counts on both sides) before anything is written; outputs appear only when all succeed.
PrepareReport prepare(const PrepareOptions& opt);

// What `prepare` wrote, as read back by train/translate from <dir>/meta.yaml.
struct PreparedMeta {
  std::string task = "translation";  // translation | language_modeling (src_lang == tgt_lang)
  std::string dir, src_lang, tgt_lang;
  std::string src_spm, tgt_spm;    // absolute paths of the SentencePiece models
  std::string src_dict, tgt_dict;  // absolute paths of dict.<lang>.txt
  bool joint = true;
  std::vector<std::string> shards;  // absolute paths of its train shards (prepare --shard-size); empty: none
  // "leanseq" (meta.yaml) or "fairseq": a directory written by fairseq-preprocess (dict.<lang>.txt
  // and <split>.<src>-<tgt>.<lang>.bin/.idx, no SentencePiece model: src_spm and tgt_spm are empty;
  // with --only-source, a language model's: dict.txt and <split>.bin/.idx, its language "lm").
  std::string format = "leanseq";
  bool language_model() const { return task == "language_modeling"; }
  std::string split_prefix(const std::string& split, const std::string& lang) const;
};
// A directory with meta.yaml, or one fairseq-preprocess wrote for one language pair. DataError
// naming the directory otherwise.
PreparedMeta load_prepared(const std::string& dir);

}  // namespace leanseq::data

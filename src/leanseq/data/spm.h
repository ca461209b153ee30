// SentencePiece: train, encode to pieces, decode pieces to text. The work happens in the
// leanseq-spm helper process (see spm_helper/leanseq_spm.cpp for why).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "leanseq/core/line_reader.h"
#include "leanseq/data/text_pipeline.h"

namespace leanseq::data {

struct SpmTrainOptions {
  int64_t vocab_size = 8000;
  std::string model_type = "unigram";  // unigram | bpe
  double character_coverage = 1.0;
  int64_t input_sentence_size = 2000000;
};

class SentencePiece : public TextPipeline {
 public:
  explicit SentencePiece(const std::string& model_path);
  ~SentencePiece() override;
  SentencePiece(const SentencePiece&) = delete;
  SentencePiece& operator=(const SentencePiece&) = delete;
  std::vector<std::string> encode(const std::string& text) const override;
  std::string decode(const std::vector<std::string>& pieces) const override;
  const std::string& path() const { return path_; }

  // Trains a model on the lines of `inputs`, writing `<model_prefix>.model` and `.vocab`.
  static void train(const std::vector<std::string>& inputs, const std::string& model_prefix,
                    const SpmTrainOptions& opt);

 private:
  std::string request(char kind, const std::string& payload) const;
  void stop_helper();  // closes its pipes and waits for it (a destructor's work, also a failed constructor's)
  std::string path_;
  mutable std::mutex mutex_;  // one request at a time on the helper's pipes
  pid_t pid_ = -1;
  int to_ = -1;                           // the helper's standard input
  std::unique_ptr<io::LineReader> from_;  // its standard output
};

// Path of the leanseq-spm helper: $LEANSEQ_SPM_HELPER, else found relative to the running
// executable or to the shared object holding leanseq (in the build tree, or installed in
// libexec/leanseq/); Error listing where it looked when it is nowhere.
std::string spm_helper_path();

}  // namespace leanseq::data

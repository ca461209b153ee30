// How text becomes the subword pieces a dictionary knows, and back: SentencePiece (data/spm.h),
// or Moses tokenization with subword-nmt BPE (text/moses_bpe.h) for models trained that way.
#pragma once
#include <string>
#include <vector>

namespace leanseq::data {

class TextPipeline {
 public:
  virtual ~TextPipeline() = default;
  virtual std::vector<std::string> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<std::string>& pieces) const = 0;
};

}  // namespace leanseq::data

// The text pipeline of models trained on Moses-tokenized, BPE-segmented text (fairseq's --tokenizer
// moses --bpe subword_nmt): Moses tokenization with XML escaping, then BPE; back: "@@ " joins
// removed, then Moses detokenization with unescaping.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "leanseq/data/text_pipeline.h"
#include "leanseq/text/bpe.h"
#include "leanseq/text/moses.h"

namespace leanseq::text {

class MosesBpePipeline : public data::TextPipeline {
 public:
  // `bpe_codes`: the codes file's text ("" for Moses tokens without BPE); `origin` names it in errors.
  MosesBpePipeline(const std::string& lang, const std::string& bpe_codes, const std::string& origin);
  std::vector<std::string> encode(const std::string& text) const override;
  std::string decode(const std::vector<std::string>& pieces) const override;

 private:
  MosesTokenizer tokenizer_;
  MosesDetokenizer detokenizer_;
  std::unique_ptr<Bpe> bpe_;
};

}  // namespace leanseq::text

// The text pipelines of models trained on tokenized, BPE-segmented text (fairseq's --tokenizer and
// --bpe subword_nmt/fastbpe): Moses tokenization (or none: the text comes tokenized), then BPE
// when there are codes; back: "@@ " joins removed, then Moses detokenization (or the tokens as
// they are, space-separated).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "leanseq/data/text_pipeline.h"
#include "leanseq/text/bpe.h"
#include "leanseq/text/moses.h"

namespace leanseq::text {

// How a checkpoint names its tokenizer (VocabFiles::tokenizer, text.tokenizer): "moses" is
// fairseq's --tokenizer moses, with its defaults: aggressive dash splits ("a-b" -> "a @-@ b") and
// XML escaping; "moses no-dash-splits", "moses no-escape" or both are its --moses-no-dash-splits
// and --moses-no-escape; "none": no tokenizer (fairseq without --tokenizer).
struct TokenizerSpec {
  bool moses = true;
  bool dash_splits = true;
  bool escape = true;
  std::string text() const;
};
// ConfigError naming `origin` for any other spelling.
TokenizerSpec parse_tokenizer_spec(const std::string& spec, const std::string& origin);

class MosesBpePipeline : public data::TextPipeline {
 public:
  // `bpe_codes`: the codes file's text ("" for tokens without BPE); `origin` names it in errors.
  MosesBpePipeline(const std::string& lang, const TokenizerSpec& tokenizer, const std::string& bpe_codes,
                   const std::string& origin);
  std::vector<std::string> encode(const std::string& text) const override;
  std::string decode(const std::vector<std::string>& pieces) const override;

 private:
  std::unique_ptr<MosesTokenizer> tokenizer_;      // none: the text comes tokenized
  std::unique_ptr<MosesDetokenizer> detokenizer_;
  std::unique_ptr<Bpe> bpe_;
};

}  // namespace leanseq::text

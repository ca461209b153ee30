#include "leanseq/text/moses_bpe.h"

#include <sstream>

namespace leanseq::text {

namespace {
MosesOptions options_for(const std::string& lang) {
  MosesOptions o;
  o.lang = lang;
  return o;
}
}  // namespace

MosesBpePipeline::MosesBpePipeline(const std::string& lang, const std::string& bpe_codes, const std::string& origin)
    : tokenizer_(options_for(lang)), detokenizer_(lang) {
  if (!bpe_codes.empty()) bpe_ = std::make_unique<Bpe>(Bpe::from_text(bpe_codes, origin));
}

std::vector<std::string> MosesBpePipeline::encode(const std::string& text) const {
  std::string tokens = tokenizer_.tokenize(text);
  if (bpe_) tokens = bpe_->apply_line(tokens);
  std::vector<std::string> pieces;
  std::istringstream in(tokens);
  for (std::string p; in >> p;) pieces.push_back(p);
  return pieces;
}

std::string MosesBpePipeline::decode(const std::vector<std::string>& pieces) const {
  std::string joined;
  for (const auto& p : pieces) joined += (joined.empty() ? "" : " ") + p;
  return detokenizer_.detokenize(bpe_ ? bpe_->remove(joined) : joined);
}

}  // namespace leanseq::text

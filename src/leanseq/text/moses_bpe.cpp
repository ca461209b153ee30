#include "leanseq/text/moses_bpe.h"

#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/strings.h"

namespace leanseq::text {

std::string TokenizerSpec::text() const {
  if (!moses) return "none";
  return std::string("moses") + (dash_splits ? "" : " no-dash-splits") + (escape ? "" : " no-escape");
}

TokenizerSpec parse_tokenizer_spec(const std::string& spec, const std::string& origin) {
  std::istringstream in(spec);
  std::string word;
  TokenizerSpec t;
  in >> word;
  if (word == "none" && !(in >> word)) {
    t.moses = false;
    return t;
  }
  bool ok = word == "moses";
  while (ok && in >> word) {
    if (word == "no-dash-splits" && t.dash_splits) {
      t.dash_splits = false;
    } else if (word == "no-escape" && t.escape) {
      t.escape = false;
    } else {
      ok = false;
    }
  }
  if (!ok) {
    throw ConfigError(origin + ": unknown tokenizer '" + spec +
                      "' (moses, optionally with no-dash-splits and no-escape, or none)");
  }
  return t;
}

MosesBpePipeline::MosesBpePipeline(const std::string& lang, const TokenizerSpec& tokenizer, const std::string& bpe_codes,
                                   const std::string& origin) {
  if (tokenizer.moses) {
    MosesOptions o;
    o.lang = lang;
    o.escape = tokenizer.escape;
    o.aggressive_dash_splits = tokenizer.dash_splits;
    tokenizer_ = std::make_unique<MosesTokenizer>(o);
    detokenizer_ = std::make_unique<MosesDetokenizer>(lang);
  }
  if (!bpe_codes.empty()) bpe_ = std::make_unique<Bpe>(Bpe::from_text(bpe_codes, origin));
}

std::vector<std::string> MosesBpePipeline::encode(const std::string& text) const {
  std::string tokens = tokenizer_ ? tokenizer_->tokenize(text) : text;
  if (bpe_) tokens = bpe_->apply_line(tokens);
  std::vector<std::string> pieces;
  std::istringstream in(tokens);
  for (std::string p; in >> p;) pieces.push_back(p);
  return pieces;
}

std::string MosesBpePipeline::decode(const std::vector<std::string>& pieces) const {
  std::string joined = join_words(pieces);
  if (bpe_) joined = bpe_->remove(joined);
  return detokenizer_ ? detokenizer_->detokenize(joined) : joined;
}

}  // namespace leanseq::text
